"""MaxText's model and sharded train step as a pipecheck Workload, and MaxText's own host work
between steps (metric logger, checkpoint, eval) as step hooks for the real-data run.

Built through MaxText's own set-up (``train_utils.setup_train_loop``,
``jit_train_and_eval_step``) on the user's config with ``dataset_type=synthetic`` and no
checkpointing, so that building the model neither starts the Grain pipeline nor restores or
writes the user's checkpoints; the model, optimizer, shardings and step are the config's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

from pipecheck.config import RunConfig
from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch, BatchSpec, HookRecorder, PyTree, StepHook
from pipecheck.workloads.base import Workload
from pipecheck.workloads.maxtext import (
    LOSS_KEY,
    TOKENS_KEY,
    _quiet_absl,
    hyperparameters,
    make_put,
    maxtext_error,
    pipeline,
)

if TYPE_CHECKING:  # pragma: no cover
    import jax

METRICS_KEY = "maxtext"
"""The metrics entry holding MaxText's whole metrics (for its metric logger)."""


class MaxTextStep:
    """MaxText's jitted train step as pipecheck's loop calls it: ``(state, batch) ->
    (state, {"loss": ..., "maxtext": metrics})``, under MaxText's mesh and logical axis rules
    as its loop calls it. Nothing is read from the device here."""

    __name__ = "train_step"

    def __init__(self, jitted: Any, mesh: Any, rules: Any, params: PyTree = None) -> None:
        self._jitted, self._mesh, self._rules = jitted, mesh, rules
        self.params = params
        """The model's parameters as set up (for MaxText's metric logger's parameter count)."""

    def _context(self) -> Any:
        import jax
        from flax.core.spmd import logical_axis_rules

        stack = contextlib.ExitStack()
        stack.enter_context(jax.set_mesh(self._mesh))
        stack.enter_context(logical_axis_rules(self._rules))
        return stack

    def __call__(self, state: PyTree, batch: Batch, /) -> tuple[PyTree, PyTree]:
        with self._context():
            state, metrics = self._jitted(state, batch)
        return state, {"loss": metrics["scalar"][LOSS_KEY], METRICS_KEY: metrics}

    def lower(self, state: PyTree, batch: Batch | BatchSpec, /) -> jax.stages.Lowered:
        with self._context():
            return self._jitted.lower(state, batch)


@dataclasses.dataclass
class _Built:
    hp: Any
    mesh: Any
    state: PyTree
    jitted: Any
    rng: Any
    shaped: Any


def _setup(config: RunConfig) -> _Built:
    """MaxText's own set-up of the model, state and jitted step (train.py's train_loop)."""
    # lazy: MaxText, Flax and JAX imported only for a MaxText workload
    from flax import nnx
    from maxtext.trainers.pre_train import train as mx_train
    from maxtext.utils import sharding, train_utils

    hp = hyperparameters(config, dataset_type="synthetic", enable_checkpointing=False)
    try:
        with _quiet_absl():
            (rng, _, shardings, _, mesh, _, data_iterator, _, _, _, state) = \
                train_utils.setup_train_loop(hp, None)
            graph, state = nnx.split(state)
            params_shardings, shardings = sharding.maybe_update_params_sharding_with_opt(
                hp, shardings)
            jitted, _ = train_utils.jit_train_and_eval_step(
                hp, graph, mesh, state, shardings, mx_train.train_step, mx_train.eval_step,
                None, params_shardings)
            synthetic = next(data_iterator)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - MaxText raises many kinds for a bad config
        raise maxtext_error(e, "model set-up") from None
    return _Built(hp, mesh, state, jitted, rng, synthetic)


def build(config: RunConfig) -> Workload:
    """The MaxText workload: its model and train step, T's batch from its synthetic data,
    D's pipeline from its Grain pipeline (built per setting)."""
    import jax

    b = _setup(config)
    host = {k: np.asarray(v) for k, v in b.shaped.items()}
    put = make_put(b.hp, b.mesh)
    spec = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
            for k, v in b.shaped.items()}
    first = b.state

    def init_state() -> PyTree:
        # the step donates its state: every run starts from a fresh copy of the initial one
        return jax.tree.map(lambda x: x.copy() if hasattr(x, "copy") else x, first)

    def dataset() -> Any:
        return pipeline(config, b.mesh)[0]

    return Workload(
        name="maxtext",
        config=config,
        mesh=b.mesh,
        train_step=MaxTextStep(b.jitted, b.mesh, b.hp.logical_axis_rules,
                               getattr(first, "model", first)),
        train_step_name="train_step",
        init_state=init_state,
        batch_spec=spec,
        host_batch=lambda: host,
        dataset=dataset,
        tokens_key=TOKENS_KEY if TOKENS_KEY in host else None,
    ) if put is not None else _no_put()


def _no_put() -> Workload:  # pragma: no cover - make_put always returns a function
    raise ConfigError("MaxText's device put could not be built")


# --- R: MaxText's host work between steps -------------------------------------------------
def real_hooks(config: RunConfig, workload: Workload) -> tuple[StepHook, ...]:
    """MaxText's own host work after each step of the real-data run, as its loop does it:
    its metric logger every step (``buffer_and_write_metrics``: it reads the previous
    step's metrics on the host), a checkpoint save at ``checkpoint_period`` (with
    ``enable_checkpointing``; written to a directory of pipecheck's, never the run's own) and
    an eval at ``eval_interval`` (``eval_steps`` batches of its eval pipeline)."""
    where = tempfile.mkdtemp(prefix="pipecheck-maxtext-")
    hp = hyperparameters(config, base_output_directory=where, run_name="pipecheck")
    step = workload.train_step
    params = step.params if isinstance(step, MaxTextStep) else None
    hooks: list[StepHook] = [_metric_logger_hook(hp, params)]
    if hp.enable_checkpointing and hp.checkpoint_period > 0:
        hooks.append(_checkpoint_hook(hp, workload))
    return tuple(hooks)


def _metric_logger_hook(hp: Any, params: PyTree) -> StepHook:
    from maxtext.common import metric_logger
    from maxtext.utils import maxtext_utils

    logger = metric_logger.MetricLogger(
        config=hp, learning_rate_schedule=maxtext_utils.create_learning_rate_schedule(hp),
        start_step=0)
    with _quiet_absl():
        logger.write_setup_info_to_tensorboard(params)  # as train_loop does: its metadata
    last = [datetime.datetime.now()]

    def metric_logger_hook(step: int, state: PyTree, metrics: PyTree,
                           recorder: HookRecorder) -> None:
        now = datetime.datetime.now()
        with recorder.span("log"):
            logger.buffer_and_write_metrics(metrics[METRICS_KEY], step, now - last[0])
        last[0] = now

    return metric_logger_hook


def _checkpoint_hook(hp: Any, workload: Workload) -> StepHook:
    from maxtext.common import checkpointing
    from maxtext.utils import train_utils

    try:
        with _quiet_absl():
            manager = train_utils.create_checkpoint_manager(hp, workload.mesh, None)
    except Exception as e:  # noqa: BLE001
        raise maxtext_error(e, "checkpoint set-up") from None
    period = int(hp.checkpoint_period)

    def checkpoint_hook(step: int, state: PyTree, metrics: PyTree,
                        recorder: HookRecorder) -> None:
        if step == 0 or step % period:
            return
        with recorder.span("checkpoint"):
            recorder.tag("checkpoint")
            checkpointing.maybe_save_checkpoint(manager, state, hp, None, step)

    return checkpoint_hook
