"""The calibrated workload: every verdict on purpose.

Compute: a chain of ``h = tanh(h @ w)`` matmuls whose length is calibrated at
start-up so one step costs ``compute_ms`` (real XLA work, so dispatch stays
asynchronous). Loading: each batch costs ``load_ms`` of sleeping (latency, as
I/O: it overlaps across workers) plus ``cpu_ms`` of busy CPU work in the
transform, carries ``element_kb`` of extra payload, and costs ``consumer_ms`` of CPU in
the training process after the workers. ``host_sync=every_step`` makes the training loop
read the loss of the step it just dispatched, the classic forced sync. ``aot_sharding_mismatch``
lowers the step ahead of time with an unsharded batch spec, reproducing the
double-compilation bug. ``checkpoint_every``/``checkpoint_ms`` and
``eval_every``/``eval_ms`` add host-blocking checkpoints and evals (step hooks
that run after the previous step's loss was observed). In a multi-process run each process
loads its share of the batches (every ``process_count``-th index) and process
``straggler_process`` loads with ``straggler_load_ms`` instead of ``load_ms``: a straggler
on purpose.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from pipecheck.config import COMMON_KEYS, Key, RunConfig
from pipecheck.data.grain_pipeline import InputPipeline, MainProcessMap
from pipecheck.step_types import Batch, HookRecorder, PyTree, StepHook
from pipecheck.workloads.base import Workload, spec_of
from pipecheck.workloads.devices import (
    batch_sharding,
    data_mesh,
    host_batch_size,
    put_global,
    replicated,
    shard_by_process,
)

if TYPE_CHECKING:  # pragma: no cover
    import jax
    from jax.typing import ArrayLike

KEYS: tuple[Key, ...] = (
    *COMMON_KEYS,
    Key("compute_ms", float, 50.0, "device compute per step, in ms (calibrated at start-up)",
        minimum=0.1),
    Key("chain_iters", int, 0, "matmul-chain iterations per step, fixed (0: sized at "
        "start-up so a step costs compute_ms); runs that must do the same work use it",
        minimum=0),
    Key("load_ms", float, 0.0, "per-batch loading latency, in ms (sleeps, per worker)", minimum=0),
    Key("cpu_ms", float, 0.0, "per-batch CPU work in the transform, in ms", minimum=0),
    Key("consumer_ms", float, 0.0, "per-batch CPU work in the training process, in ms, "
        "after the workers (as collation or conversion after mp_prefetch)", minimum=0),
    Key("element_kb", float, 0.0, "extra payload per batch, in KiB (a uint8 array that "
        "travels through shared memory and device_put)", minimum=0),
    Key("host_sync", str, "none", "none | every_step: the loop calls float(loss) on the "
        "step it just dispatched", choices=("none", "every_step")),
    Key("aot_sharding_mismatch", bool, False, "lower the step AOT with an unsharded batch spec "
        "(reproduces the double compilation)"),
    Key("feature_dim", int, 256, "width of the matmul chain (and of each example)", minimum=8),
    Key("checkpoint_every", int, 0, "save the state every N steps (steps N, 2N, ...; "
        "0: never)", minimum=0),
    Key("checkpoint_ms", float, 200.0, "host-blocking cost of one checkpoint, in ms: "
        "jax.device_get of the state, then sleep until this much has elapsed", minimum=0),
    Key("eval_every", int, 0, "run an eval every N steps (steps N, 2N, ...; 0: never)",
        minimum=0),
    Key("eval_ms", float, 100.0, "host-blocking cost of one eval, in ms: wait for the state, "
        "then sleep until this much has elapsed", minimum=0),
    Key("straggler_process", int, -1, "in a multi-process run, the process whose loader is "
        "slow on purpose (-1: none)", minimum=-1),
    Key("straggler_load_ms", float, 0.0, "that process's per-batch loading latency, in ms, "
        "instead of load_ms", minimum=0),
)

CALIBRATION_ITERS = (8, 72)
"""Chain lengths timed at start-up; the slope between them is the cost of one matmul."""
CALIBRATION_REPEATS = 7
"""Timings of each chain length; the fastest counts (``calibrate_iters``)."""


def _chain(w: jax.Array, h: ArrayLike, iters: int | jax.Array) -> jax.Array:
    # lazy: Grain, JAX imported where used, so `import pipecheck` stays light
    import jax
    import jax.numpy as jnp

    return jax.lax.fori_loop(0, iters, lambda _, a: jnp.tanh(a @ w), h)


def train_step(state: dict[str, jax.Array],
               batch: Batch) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """One calibrated step: the matmul chain on the batch; the loss feeds back into w."""
    import jax.numpy as jnp

    h = _chain(state["w"], batch["x"], state["iters"])
    loss = jnp.mean(h * h)
    new_state = {"w": state["w"] - 1e-6 * loss, "iters": state["iters"], "step": state["step"] + 1}
    return new_state, {"loss": loss}


def calibrate_iters(
    w: jax.Array, x: jax.Array, compute_ms: float,
    clock: Callable[[], float] = time.perf_counter
) -> tuple[int, float]:
    """Chain length that costs ``compute_ms`` on these arrays, and the measured s/iteration.

    Uses a separately jitted chain (same shapes and sharding) so the train step
    itself is not compiled here and its compilations stay countable. Each length's
    *fastest* timing counts: on a busy machine other processes only ever add to a timing,
    so the fastest is the work's own cost, and a step holds ``compute_ms`` of work whatever
    the load was while calibrating (a median, inflated by a burst of load at start-up, made
    the chain too short: 1 ms of compute where 10 were asked, with two CPU hogs running).
    """
    import jax

    burn = jax.jit(_chain)
    times: dict[int, float] = {}
    for n in CALIBRATION_ITERS:
        burn(w, x, n).block_until_ready()  # compile + warm
        samples = []
        for _ in range(CALIBRATION_REPEATS):
            t0 = clock()
            burn(w, x, n).block_until_ready()
            samples.append(clock() - t0)
        times[n] = float(np.min(samples))
    lo, hi = CALIBRATION_ITERS
    per_iter = max((times[hi] - times[lo]) / (hi - lo), 1e-7)
    overhead = max(times[lo] - lo * per_iter, 0.0)
    iters = max(1, round((compute_ms / 1000.0 - overhead) / per_iter))
    return iters, per_iter


def log_current_loss(step: int, state: PyTree, metrics: PyTree,
                     recorder: HookRecorder) -> None:
    """host_sync=every_step: the training loop logs the loss of the step it just dispatched."""
    with recorder.span("log"):
        loss = float(metrics["loss"])  # forced sync: waits for the step just dispatched
    del loss


def blocking_hook(
    kind: str,
    every: int,
    cost_ms: float,
    wait: Callable[[PyTree], object],
    sleep: Callable[[float], None] = time.sleep,
) -> StepHook:
    """A StepHook that, on steps ``every``, ``2*every``, ..., blocks the host as a
    checkpoint or eval does: ``wait(state)`` (a real device-to-host wait), then sleep
    until ``cost_ms`` has elapsed, inside span ``kind``, tagging the step ``kind``.

    The loop runs hooks after the previous step's loss was observed, so the cost is
    charged to the step that ran it. ``wait`` and ``sleep`` are injectable for tests;
    the hook reads the recorder's clock.
    """
    if every < 1:
        raise ValueError("every must be >= 1")

    def hook(step: int, state: PyTree, metrics: PyTree, recorder: HookRecorder) -> None:
        if step == 0 or step % every:
            return
        with recorder.span(kind):
            recorder.tag(kind)
            t0 = recorder.clock()
            wait(state)
            left = cost_ms / 1000.0 - (recorder.clock() - t0)
            if left > 0:
                sleep(left)

    hook.__name__ = f"{kind}_hook"
    hook.__qualname__ = hook.__name__
    return hook


def save_state(state: PyTree) -> PyTree:
    """The checkpoint's blocking part: copy the whole state to the host."""
    import jax

    return jax.device_get(state)


def wait_for_state(state: PyTree) -> PyTree:
    """The eval's blocking part: the eval needs the updated parameters."""
    import jax

    return jax.block_until_ready(state)


def hooks_for(config: RunConfig) -> tuple[StepHook, ...]:
    """The calibrated workload's step hooks, in the order the loop runs them."""
    hooks: list[StepHook] = []
    if config["host_sync"] == "every_step":
        hooks.append(log_current_loss)
    if config["checkpoint_every"] > 0:
        hooks.append(blocking_hook("checkpoint", config["checkpoint_every"],
                                   config["checkpoint_ms"], save_state))
    if config["eval_every"] > 0:
        hooks.append(blocking_hook("eval", config["eval_every"], config["eval_ms"],
                                   wait_for_state))
    return tuple(hooks)


def busy(ms: float) -> None:
    """Hold the CPU (and the GIL) for ``ms`` of this thread's CPU time."""
    end = time.thread_time() + ms / 1000.0
    acc = 0
    while time.thread_time() < end:
        acc += sum(range(200))


class CalibratedBatches:
    """Grain map: batch index -> one whole batch, costing load_ms of sleep + cpu_ms of CPU,
    with ``element_kb`` KiB of extra payload."""

    def __init__(self, batch_size: int, feature_dim: int, load_ms: float, cpu_ms: float,
                 seed: int, element_kb: float = 0.0) -> None:
        self.batch_size = batch_size
        self.feature_dim = feature_dim
        self.load_ms = load_ms
        self.cpu_ms = cpu_ms
        self.seed = seed
        self.element_kb = element_kb

    def __call__(self, index: int) -> dict[str, np.ndarray]:
        if self.load_ms > 0:
            time.sleep(self.load_ms / 1000.0)
        if self.cpu_ms > 0:
            busy(self.cpu_ms)
        rng = np.random.default_rng((self.seed, int(index)))
        x = rng.standard_normal((self.batch_size, self.feature_dim), dtype=np.float32)
        if self.element_kb > 0:
            per_example = max(1, math.ceil(self.element_kb * 1024 / self.batch_size))
            payload = np.full((self.batch_size, per_example), index % 251, np.uint8)
            return {"x": x, "payload": payload}
        return {"x": x}


def load_ms_for(config: RunConfig, process_index: int) -> float:
    """This process's per-batch loading latency: ``straggler_load_ms`` on the straggler."""
    if config["straggler_process"] == process_index:
        return float(config["straggler_load_ms"])
    return float(config["load_ms"])


class Consume:
    """Per-batch work in the training process, after the workers (``consumer_ms`` of CPU)."""

    def __init__(self, consumer_ms: float) -> None:
        self.consumer_ms = consumer_ms

    def __call__(self, batch: Batch) -> Batch:
        busy(self.consumer_ms)
        return batch


def make_dataset(config: RunConfig) -> InputPipeline:
    """The calibrated input pipeline: an endless MapDataset of whole (host-local) batches,
    sharded by process (this process reads every ``process_count``-th batch index); with
    ``consumer_ms``, a transform that runs in the training process after the workers."""
    import grain
    import jax

    batches = CalibratedBatches(host_batch_size(config["batch_size"], config["devices"]),
                                config["feature_dim"], load_ms_for(config, jax.process_index()),
                                config["cpu_ms"], config["seed"], config["element_kb"])
    ds = shard_by_process(grain.MapDataset.range(1 << 30)).map(batches)
    if config["consumer_ms"] > 0:
        return MainProcessMap(ds, Consume(config["consumer_ms"]))
    return ds


def build(config: RunConfig) -> Workload:
    import jax
    import jax.numpy as jnp

    n_dev = config["devices"]
    mesh = data_mesh(n_dev)
    local_batch = host_batch_size(config["batch_size"], n_dev)
    dim = config["feature_dim"]
    data_sharding = batch_sharding(mesh)
    rep = replicated(mesh)
    example = CalibratedBatches(local_batch, dim, 0.0, 0.0, config["seed"],
                                config["element_kb"])(0)
    spec = spec_of(example, data_sharding)
    rng = np.random.default_rng(config["seed"])
    w_host = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    w = jax.device_put(w_host, rep)
    x = put_global(data_sharding)(example)["x"]
    iters = config["chain_iters"] or calibrate_iters(w, x, config["compute_ms"])[0]
    if jax.process_count() > 1:
        # Every process must run the same step: process 0's calibration decides.
        from jax.experimental import multihost_utils

        iters = int(multihost_utils.broadcast_one_to_all(np.int32(iters)))
    flops = 2.0 * config["batch_size"] * dim * dim * iters

    def init_state() -> dict[str, jax.Array]:
        return {
            "w": jax.device_put(w_host, rep),
            "iters": jax.device_put(jnp.int32(iters), rep),
            "step": jax.device_put(jnp.int32(0), rep),
        }

    def prepare(workload: Workload, state: PyTree) -> None:
        if config["aot_sharding_mismatch"]:
            # The bug, on purpose: the batch spec carries no sharding, so the
            # executable compiled here does not match the sharded batch.
            unsharded = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in spec.items()}
            state_spec = jax.tree.map(
                lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), state)
            workload.train_step.lower(state_spec, unsharded).compile()

    return Workload(
        name="calibrated",
        config=config,
        mesh=mesh,
        train_step=jax.jit(train_step, donate_argnums=()),
        train_step_name="train_step",
        init_state=init_state,
        batch_spec=spec,
        host_batch=lambda: example,
        dataset=lambda: make_dataset(config),
        hooks=hooks_for(config),
        prepare=prepare,
        flops_per_step=flops,
    )
