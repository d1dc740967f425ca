"""A user's training loop captured with jax.profiler, run as a script by the tests (and by
tests/data/make_profile_captures.py for the committed captures).

usage: python profile_loop.py OUT_DIR --loader {generator,grain,grain-workers}
           [--load-ms MS] [--compute-ms MS] [--sync {none,float,block}] [--steps N]
           [--no-markers] [--small-calls N] [--small-fns K]

The loop is written as users write it: a Python generator (or a Grain MapDataset mapped on
the training thread, or a grain.DataLoader with a worker process) that costs ``--load-ms``
per batch, a jitted step of about ``--compute-ms``, ``StepTraceAnnotation("train",
step_num=i)`` around each step, and with ``--sync float`` a ``float(loss)`` of the step
just dispatched, in ``log_loss`` on the line marked FORCED-SYNC. ``--small-calls N``
replaces the step by N tiny jitted calls (the device waits for the host to dispatch them).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

DIM = 512
ROWS = 8
"""The step multiplies ROWS copies of the batch: few, large ops keep the capture small."""


@jax.jit
def train_step(w, x, iters):
    h = jax.lax.fori_loop(0, iters, lambda _, a: jnp.tanh(a @ w), jnp.tile(x, (ROWS, 1)))
    loss = jnp.mean(h * h)
    return w - 1e-6 * loss, loss


@jax.jit
def tiny_update(v, x):
    return v + 1e-6 * x[0, :8]


def calibrate(compute_ms, w, x):
    """The fori_loop length that makes one step cost about compute_ms on this machine."""
    iters = jnp.int32(5)
    jax.block_until_ready(train_step(w, x, iters))
    t0 = time.perf_counter()
    for _ in range(3):
        jax.block_until_ready(train_step(w, x, iters))
    per_iter = (time.perf_counter() - t0) / 3 / 5
    return jnp.int32(max(1, round(compute_ms / 1e3 / per_iter)))


def make_batch(index, load_ms):
    time.sleep(load_ms / 1e3)  # reading and decoding, as I/O
    return np.full((64, DIM), 1.0 + index % 7, dtype=np.float32)


def generator(load_ms):
    index = 0
    while True:
        yield make_batch(index, load_ms)
        index += 1


class Load:
    def __init__(self, load_ms):
        self.load_ms = load_ms

    def __call__(self, index):
        return make_batch(index, self.load_ms)


def grain_batches(load_ms, workers):
    import grain
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain reads absl flags; a plain script never parses them
    source = grain.MapDataset.range(1_000_000).map(Load(load_ms))
    if workers == 0:
        # the map runs on the training thread (no read threads), as in issue 19's loops
        options = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)
        return iter(source.to_iter_dataset(options))

    class LoadRecord(grain.transforms.Map):
        """A Grain map: the batch for an index."""

        def __init__(self, load_ms):
            self.load_ms = load_ms

        def map(self, index):
            return {"x": make_batch(index, self.load_ms)}

    loader = grain.DataLoader(
        data_source=grain.sources.RangeDataSource(0, 1_000_000, 1),
        operations=[LoadRecord(load_ms)],
        sampler=grain.samplers.SequentialSampler(1_000_000),
        worker_count=workers,
    )
    return (b["x"] for b in loader)


def log_loss(history, loss):
    history.append(float(loss))  # FORCED-SYNC
    return history


# Added after the committed captures were made: the functions above keep their lines (a
# capture names a function by its definition line, and the tests find the sync from it).
def wait_for_step(loss):
    """``--sync block``: wait for the step just dispatched, as a loop timing its steps does."""
    jax.block_until_ready(loss)  # BLOCKING-SYNC


@jax.jit
def small_update(v, x):
    return jnp.tanh(v + 1e-6 * x)


@jax.jit
def small_scale(v, x):
    return jnp.tanh(v * (1.0 + 1e-6 * x))


@jax.jit
def small_shift(v, x):
    return jnp.tanh(v - 1e-6 * x)


SMALL_FNS = (small_update, small_scale, small_shift)
"""``--small-fns K``: K different small jitted functions of the same cost, on the batch."""


def small_calls(batch, n, fns):
    """``--small-calls N``: N jitted calls, of ``tiny_update`` on 8 values (``fns`` 0), or
    taken in turn from the first ``fns`` of ``SMALL_FNS`` on the batch, copied to the device
    once (the device waits for the host to dispatch them)."""
    if not fns:
        v = jnp.zeros(8, jnp.float32)
        for _ in range(n):
            v = tiny_update(v, batch)
        return v[0]
    x = jax.device_put(batch)
    v = x
    for k in range(n):
        v = SMALL_FNS[k % fns](v, x)
    return v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--loader", default="generator",
                   choices=("generator", "grain", "grain-workers"))
    p.add_argument("--load-ms", type=float, default=0.0)
    p.add_argument("--compute-ms", type=float, default=10.0)
    p.add_argument("--sync", default="none", choices=("none", "float", "block"))
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--no-markers", action="store_true")
    p.add_argument("--small-calls", type=int, default=0)
    p.add_argument("--small-fns", type=int, default=0, choices=(0, 1, 2, 3))
    a = p.parse_args()

    w = jnp.eye(DIM, dtype=jnp.float32) * 0.5
    x0 = jnp.ones((64, DIM), jnp.float32)
    iters = calibrate(a.compute_ms, w, x0)
    if a.loader == "generator":
        batches = generator(a.load_ms)
    else:
        import grain  # noqa: F401
        batches = grain_batches(a.load_ms, 1 if a.loader == "grain-workers" else 0)
    history = []
    for fn in SMALL_FNS[:a.small_fns]:  # compiled before the capture, as train_step is
        jax.block_until_ready(fn(x0, x0))
    jax.profiler.start_trace(a.out)
    for step in range(a.steps):
        with (jax.profiler.StepTraceAnnotation("train", step_num=step)
              if not a.no_markers else _nothing()):
            batch = next(batches)
            if a.small_calls:
                loss = small_calls(batch, a.small_calls, a.small_fns)
            else:
                w, loss = train_step(w, batch, iters)
            if a.sync == "float":
                log_loss(history, loss)
            elif a.sync == "block":
                wait_for_step(loss)
    jax.block_until_ready(w)
    jax.profiler.stop_trace()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
