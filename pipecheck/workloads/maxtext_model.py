"""MaxText's model and sharded train step as a pipecheck Workload, and MaxText's own host work
between steps (metric logger, checkpoint, eval) as step hooks for the real-data run.

Built through MaxText's own set-up (``train_utils.setup_train_loop``,
``jit_train_and_eval_step``) on the user's config with ``dataset_type=synthetic`` and no
checkpointing, so that building the model neither starts the Grain pipeline nor restores or
writes the user's checkpoints; the model, optimizer, shardings, train step and eval step are
the config's.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from pipecheck.config import RunConfig
from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch, BatchSpec, HookRecorder, PyTree, StepHook
from pipecheck.workloads.base import Workload
from pipecheck.workloads.maxtext import (
    LOSS_KEY,
    TOKENS_KEY,
    _quiet_absl,
    eval_iterator,
    hyperparameters,
    make_put,
    maxtext_error,
    pipeline,
)

if TYPE_CHECKING:  # pragma: no cover
    import jax

METRICS_KEY = "maxtext"
"""The metrics entry holding MaxText's whole metrics (for its metric logger)."""


def _under(mesh: Any, rules: Any) -> contextlib.ExitStack:
    """MaxText's mesh and logical axis rules, as its loop enters them around a step."""
    import jax
    from flax.core.spmd import logical_axis_rules

    stack = contextlib.ExitStack()
    stack.enter_context(jax.set_mesh(mesh))
    stack.enter_context(logical_axis_rules(rules))
    return stack


class MaxTextEval:
    """MaxText's jitted eval step as its loop's eval calls it: each eval batch put with the
    eval input sharding, the step under MaxText's mesh and ``logical_axis_rules_for_eval``;
    returns MaxText's eval metrics, read nothing from the device."""

    def __init__(self, jitted: Any, hp: Any, mesh: Any, state: PyTree) -> None:
        from maxtext.utils import sharding

        self._jitted, self._hp, self._mesh = jitted, hp, mesh
        self._rules = hp.logical_axis_rules_for_eval
        self._sharding = sharding.get_input_data_sharding(hp, mesh, rules=self._rules)
        self._state = state  # the initial state (never donated), for the ahead-of-time compile

    def warm(self) -> None:
        """Compile ahead of the loop, as MaxText's ``train_loop`` does (so that the first eval
        does not compile): the jitted step's call then finds the executable."""
        import jax
        from maxtext.utils import max_utils, maxtext_utils

        if getattr(jax.config, "jax_enable_pgle", False):  # MaxText skips it: not reused
            return
        options = max_utils.parse_libtpu_flags_to_dict(self._hp.compile_xla_flags)
        with _under(self._mesh, self._rules):
            shaped = maxtext_utils.get_shaped_batch(self._hp, batch_sharding=self._sharding,
                                                    is_eval=True)
            self._jitted.lower(self._state, shaped).compile(compiler_options=options)

    def __call__(self, state: PyTree, batch: Batch, /) -> PyTree:
        import jax

        batch = jax.device_put(batch, self._sharding)
        with _under(self._mesh, self._rules):
            return self._jitted(state, batch)


class MaxTextStep:
    """MaxText's jitted train step as pipecheck's loop calls it: ``(state, batch) ->
    (state, {"loss": ..., "maxtext": metrics})``, under MaxText's mesh and logical axis rules
    as its loop calls it. Nothing is read from the device here."""

    __name__ = "train_step"

    def __init__(self, jitted: Any, mesh: Any, rules: Any, params: PyTree = None,
                 evaluate: MaxTextEval | None = None) -> None:
        self._jitted, self._mesh, self._rules = jitted, mesh, rules
        self.params = params
        """The model's parameters as set up (for MaxText's metric logger's parameter count)."""
        self.evaluate = evaluate
        """MaxText's eval step (None: the config runs no eval, ``eval_interval <= 0``)."""

    def __call__(self, state: PyTree, batch: Batch, /) -> tuple[PyTree, PyTree]:
        with _under(self._mesh, self._rules):
            state, metrics = self._jitted(state, batch)
        return state, {"loss": metrics["scalar"][LOSS_KEY], METRICS_KEY: metrics}

    def lower(self, state: PyTree, batch: Batch | BatchSpec, /) -> jax.stages.Lowered:
        with _under(self._mesh, self._rules):
            return self._jitted.lower(state, batch)


@dataclasses.dataclass
class _Built:
    hp: Any
    mesh: Any
    state: PyTree
    jitted: Any
    rng: Any
    shaped: Any
    evaluate: Any
    """MaxText's jitted eval step, or None (no eval in the config)."""


def _setup(config: RunConfig) -> _Built:
    """MaxText's own set-up of the model, state and jitted train and eval steps (train.py's
    train_loop: its synthetic eval iterator, made when ``eval_interval > 0``, is what makes
    ``jit_train_and_eval_step`` build the eval step)."""
    # lazy: MaxText, Flax and JAX imported only for a MaxText workload
    from flax import nnx
    from maxtext.trainers.pre_train import train as mx_train
    from maxtext.utils import sharding, train_utils

    hp = hyperparameters(config, dataset_type="synthetic", enable_checkpointing=False)
    try:
        with _quiet_absl():
            (rng, _, shardings, _, mesh, _, data_iterator, _, _, eval_data, state) = \
                train_utils.setup_train_loop(hp, None)
            graph, state = nnx.split(state)
            eval_graph = mx_train.build_eval_graphdef(hp, graph, state)
            params_shardings, shardings = sharding.maybe_update_params_sharding_with_opt(
                hp, shardings)
            jitted, evaluate = train_utils.jit_train_and_eval_step(
                hp, graph, mesh, state, shardings, mx_train.train_step, mx_train.eval_step,
                eval_data, params_shardings)
            if eval_graph is not None and evaluate is not None:  # as train_loop: MoE eval
                evaluate = train_utils.jit_eval_step(
                    hp, eval_graph, shardings, sharding.get_input_data_sharding(
                        hp, mesh, rules=hp.logical_axis_rules_for_eval), mx_train.eval_step)
            synthetic = next(data_iterator)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - MaxText raises many kinds for a bad config
        raise maxtext_error(e, "model set-up") from None
    return _Built(hp, mesh, state, jitted, rng, synthetic,
                  None if evaluate is None else MaxTextEval(evaluate, hp, mesh, state))


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
                               getattr(first, "model", first), b.evaluate),
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
def real_hooks(config: RunConfig, workload: Workload, steps: int) -> tuple[StepHook, ...]:
    """MaxText's own host work after each step of the real-data run (``steps`` steps), in its
    loop's order: a checkpoint save where its rule says (with ``enable_checkpointing``;
    written to a directory of pipecheck's, never the run's own), an eval at
    ``eval_interval`` (``eval_steps`` batches of its eval pipeline, span and tag ``eval``),
    its profiler's stop, then its metric logger (``buffer_and_write_metrics``: it reads the
    previous step's metrics on the host, and an eval's metrics at the step after it), and
    its profiler's start for the next step (``profiler``; stopped by step ``steps - 1`` at
    the latest, before the steps R may add, and before any capture of pipecheck's). The
    directory is removed when the process ends, after any
    checkpoint save still in flight (a real model's checkpoints would otherwise fill the
    disk run after run)."""
    where = tempfile.mkdtemp(prefix="pipecheck-maxtext-")
    finish: list[Callable[[], object]] = []
    atexit.register(_remove_after, finish, where)
    hp = hyperparameters(config, base_output_directory=where, run_name="pipecheck")
    step = workload.train_step
    params = step.params if isinstance(step, MaxTextStep) else None
    evaluate = step.evaluate if isinstance(step, MaxTextStep) else None
    logger = _metric_logger(hp, params)
    hooks: list[StepHook] = []
    if hp.enable_checkpointing and hp.checkpoint_period > 0:
        # R's batches come from pipecheck's own iterator of the pipeline, not MaxText's: its
        # Grain iterator state is not saved with the checkpoint (MaxText saves it only for
        # dataset_type=grain, and cannot save it without its iterator)
        hooks.append(_checkpoint_hook(hyperparameters(
            config, base_output_directory=where, run_name="pipecheck",
            dataset_type="synthetic"), workload, finish))
    if hp.eval_interval > 0 and evaluate is not None:
        hooks.append(_eval_hook(hp, workload.mesh, evaluate, logger))
    profiler = _profiler(config, where, steps, finish)
    if profiler is not None:
        hooks.append(profiler.stop_hook)
    hooks.append(_metric_logger_hook(logger))
    if profiler is not None:
        hooks.append(profiler.start_hook)
    return tuple(hooks)


@dataclasses.dataclass(frozen=True)
class ProfilerPlan:
    """Where MaxText's profiler starts and stops in a run, and the steps it covers."""

    starts: frozenset[int]
    """The steps it starts before (in the host work of the step before)."""
    stops: frozenset[int]
    """The steps it stops after."""
    tagged: frozenset[int]
    """The steps it records, and the steps whose host work starts it."""


def profiler_plan(steps: int, starts_at: Callable[[int], bool],
                  stops_at: Callable[[int], bool]) -> ProfilerPlan:
    """MaxText's profiler over a run of ``steps``, by its own rules (``starts_at``: its
    ``maybe_activate_profiler`` condition, ``stops_at``: its ``maybe_deactivate_profiler``
    one), started only when stopped and stopped only when started, and stopped after the
    last step at the latest (as MaxText's train loop stops it when it ends)."""
    starts: set[int] = set()
    stops: set[int] = set()
    tagged: set[int] = set()
    active = False
    for step in range(steps):
        if not active and starts_at(step):
            active = True
            starts.add(step)
            tagged.add(max(step - 1, 0))
        if active:
            tagged.add(step)
            if stops_at(step) or step == steps - 1:
                active = False
                stops.add(step)
    return ProfilerPlan(frozenset(starts), frozenset(stops), frozenset(tagged))


PROFILER_SPAN = "profiler"
"""The span of R's host work that starts and stops MaxText's profiler (a slow step's cause
names it: stopping writes the capture)."""


@dataclasses.dataclass(frozen=True)
class _ProfilerHooks:
    stop_hook: StepHook
    start_hook: StepHook


def _profiler(config: RunConfig, where: str, steps: int,
              finish: list[Callable[[], object]]) -> _ProfilerHooks | None:
    """MaxText's profiler in R as its loop runs it (``maybe_activate_profiler`` before a step,
    ``maybe_deactivate_profiler`` after its eval), its capture written under R's directory
    (removed at exit); the steps it covers are tagged ``profile``. None without ``profiler``
    in the config, or when it would start after R's last step."""
    from maxtext.common import profiler as mx_profiler

    hp = hyperparameters(config, base_output_directory=where, run_name="pipecheck",
                         steps=max(steps, 1))
    if not hp.profiler or steps <= int(hp.skip_first_n_steps_for_profiler):
        return None
    prof = mx_profiler.Profiler(hp, offset_step=0)
    plan = profiler_plan(
        steps,
        lambda s: s == prof.start_initial_profile_step or prof.should_activate_periodic_profile(s),
        lambda s: (s == prof.finished_initial_profile_step
                   or prof.should_deactivate_periodic_profile(s)))
    active = [False]

    def start(step: int, state: PyTree) -> None:
        prof.activate(blocking_object=state,
                      optional_postfix=f"step_{step}" if prof.profile_period > 0 else "")
        active[0] = True

    def stop(state: PyTree = None) -> None:
        if active[0]:
            prof.deactivate(blocking_object=state)
            active[0] = False

    finish.insert(0, stop)  # a run that failed while the profiler recorded
    if 0 in plan.starts:  # MaxText starts it before its first step
        start(0, None)

    def profiler_stop_hook(step: int, state: PyTree, metrics: PyTree,
                           recorder: HookRecorder) -> None:
        if step in plan.tagged:
            recorder.tag("profile")
        if step in plan.stops:
            with recorder.span(PROFILER_SPAN):  # its capture is written here
                stop(state)

    def profiler_start_hook(step: int, state: PyTree, metrics: PyTree,
                            recorder: HookRecorder) -> None:
        if step + 1 in plan.starts:
            with recorder.span(PROFILER_SPAN):
                start(step + 1, state)

    return _ProfilerHooks(profiler_stop_hook, profiler_start_hook)


def _metric_logger(hp: Any, params: PyTree) -> Any:
    """MaxText's metric logger as its train_loop sets it up (the eval shares it: it
    accumulates the eval's metrics and writes them with the next step's)."""
    from maxtext.common import metric_logger
    from maxtext.utils import maxtext_utils

    logger = metric_logger.MetricLogger(
        config=hp, learning_rate_schedule=maxtext_utils.create_learning_rate_schedule(hp),
        start_step=0)
    with _quiet_absl():
        logger.write_setup_info_to_tensorboard(params)  # as train_loop does: its metadata
    return logger


def _metric_logger_hook(logger: Any) -> StepHook:
    from maxtext.utils import exceptions

    last = [datetime.datetime.now()]

    def metric_logger_hook(step: int, state: PyTree, metrics: PyTree,
                           recorder: HookRecorder) -> None:
        now = datetime.datetime.now()
        with recorder.span("log"):
            try:
                logger.buffer_and_write_metrics(metrics[METRICS_KEY], step, now - last[0])
            except exceptions.StopTraining:  # target_eval_loss reached: R runs its steps
                pass
        last[0] = now

    return metric_logger_hook


def eval_due(step: int, interval: int, start: int) -> bool:
    """Whether MaxText's loop evaluates after train step ``step`` (its ``ran_eval``, for a
    run from step 0): every ``interval`` steps from ``eval_start_step``, step 0 included."""
    return interval > 0 and step >= start and (step - start) % interval == 0


def _eval_hook(hp: Any, mesh: Any, evaluate: MaxTextEval, logger: Any) -> StepHook:
    try:
        with _quiet_absl():
            batches = eval_iterator(hp, mesh)
            evaluate.warm()
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - MaxText raises many kinds
        raise maxtext_error(e, "eval set-up") from None
    interval, start = int(hp.eval_interval), int(hp.eval_start_step)

    def eval_hook(step: int, state: PyTree, metrics: PyTree, recorder: HookRecorder) -> None:
        if batches is None or not eval_due(step, interval, start):
            return
        with recorder.span("eval"):
            recorder.tag("eval")
            _run_eval(batches, evaluate, state, logger, int(hp.eval_steps))

    return eval_hook


def _run_eval(batches: Any, evaluate: MaxTextEval, state: PyTree, logger: Any,
              most: int) -> None:
    """MaxText's eval loop (train.py's ``training_loop_iteration``): the eval iterator reset,
    its batches through the eval step, each one's metrics to the logger (which reads them
    one batch late), until ``eval_steps`` batches (``most`` <= 0: the whole eval set)."""
    if hasattr(batches, "reset"):
        batches.reset()
    logger.reset_eval_metrics()
    count = 0
    last = datetime.datetime.now()
    logger.mark_eval_loop_start()
    for batch in batches:
        eval_metrics = evaluate(state, batch)
        now = datetime.datetime.now()
        logger.buffer_and_write_metrics(eval_metrics, count, step_time_delta=now - last,
                                        is_training=False)
        last = now
        count += 1
        if 0 < most <= count:  # before fetching another batch, as MaxText stops
            break


def _remove_after(finish: list[Callable[[], object]], where: str) -> None:
    """At exit: let the saves in flight finish (``finish``), then remove R's directory."""
    for f in finish:
        with contextlib.suppress(Exception):
            f()
    shutil.rmtree(where, ignore_errors=True)


def checkpoint_due(step: int, period: int, on_start: bool) -> bool:
    """Whether MaxText saves after train step ``step`` (its default rule, for a run from step
    0): every ``checkpoint_period`` steps, step 0 only with ``save_checkpoint_on_start``."""
    return period > 0 and step % period == 0 and (step > 0 or on_start)


def _checkpoint_hook(hp: Any, workload: Workload,
                     finish: list[Callable[[], object]]) -> StepHook:
    """MaxText's ``maybe_save_checkpoint`` after every step, as its loop calls it (it saves
    when its own rule says so: ``checkpoint_period``, step 0 with ``save_checkpoint_on_start``,
    a local or continuous checkpointing period); the steps it saves on are spanned and
    tagged ``checkpoint``. The manager's wait for saves in flight is added to ``finish``."""
    from maxtext.common import checkpointing
    from maxtext.utils import train_utils

    try:
        with _quiet_absl():
            manager = train_utils.create_checkpoint_manager(hp, workload.mesh, None)
    except Exception as e:  # noqa: BLE001
        raise maxtext_error(e, "checkpoint set-up") from None
    if manager is not None and hasattr(manager, "wait_until_finished"):
        finish.append(manager.wait_until_finished)
    saves = getattr(checkpointing, "_should_save_checkpoint_at_step", None)
    if saves is None:  # pragma: no cover - a MaxText without the rule of 0.2.5: its default
        period, on_start = int(hp.checkpoint_period), bool(hp.save_checkpoint_on_start)

        def saves(manager: Any, step: int, hp: Any, force: bool) -> bool:
            return checkpoint_due(step, period, on_start)

    def checkpoint_hook(step: int, state: PyTree, metrics: PyTree,
                        recorder: HookRecorder) -> None:
        if not saves(manager, step, hp, False):
            checkpointing.maybe_save_checkpoint(manager, state, hp, None, step)
            return
        with recorder.span("checkpoint"):
            recorder.tag("checkpoint")
            checkpointing.maybe_save_checkpoint(manager, state, hp, None, step)

    return checkpoint_hook
