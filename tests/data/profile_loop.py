"""A user's training loop captured with jax.profiler, run as a script by the tests (and by
tests/data/make_profile_captures.py for the committed captures).

usage: python profile_loop.py OUT_DIR --loader {generator,grain,grain-workers}
           [--load-ms MS] [--compute-ms MS] [--sync {none,float}] [--steps N]
           [--no-markers] [--small-calls N]

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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--loader", default="generator",
                   choices=("generator", "grain", "grain-workers"))
    p.add_argument("--load-ms", type=float, default=0.0)
    p.add_argument("--compute-ms", type=float, default=10.0)
    p.add_argument("--sync", default="none", choices=("none", "float"))
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--no-markers", action="store_true")
    p.add_argument("--small-calls", type=int, default=0)
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
    jax.profiler.start_trace(a.out)
    for step in range(a.steps):
        with (jax.profiler.StepTraceAnnotation("train", step_num=step)
              if not a.no_markers else _nothing()):
            batch = next(batches)
            if a.small_calls:
                v = jnp.zeros(8, jnp.float32)
                for _ in range(a.small_calls):
                    v = tiny_update(v, batch)
                loss = v[0]
            else:
                w, loss = train_step(w, batch, iters)
            if a.sync == "float":
                log_loss(history, loss)
    jax.block_until_ready(w)
    jax.profiler.stop_trace()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
