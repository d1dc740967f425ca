"""Overhead of pipecheck.Monitor: a bare lagged-sync loop vs the same loop under Monitor.

    PYTHONPATH=. python benchmarks/monitor_overhead.py [--rounds 9] [--steps 150]

1. End to end: a jitted matmul-chain step (tens of ms on a 2-core CPU), the same
   batches, bare and under Monitor (sync locator, gc and compile watchers on),
   alternating, round by round. Prints the median ratio monitored / bare.
2. Host cost per step: the same loops with a step that does no device work, so only the
   Monitor's machinery is timed (µs per step), with and without the sync locator.
3. The profiler-annotation gate: a span with annotations enabled vs disabled while no
   profiler captures (ns per span).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck.measure.monitor import Monitor
from pipecheck.measure.spans import SpanRecorder

ITERS = 120


@jax.jit
def train_step(w, x):
    h = jax.lax.fori_loop(0, ITERS, lambda _, a: jnp.tanh(a @ w), x)
    loss = jnp.mean(h * h)
    return w - 1e-6 * loss, {"loss": loss}


def bare(step, w, batches):
    prev = None
    for x in batches:
        w, metrics = step(w, x)
        if prev is not None:
            float(prev)
        prev = metrics["loss"]
    float(prev)


def monitored(step, w, batches, **kw):
    mon = Monitor(env={"benchmark": True}, **kw)
    for x in mon.batches(batches):
        w, metrics = mon.step(step, w, x)
    mon.finish()


def timed(fn, *args, **kw) -> float:
    t0 = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=150)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    batches = [jnp.asarray(rng.standard_normal((64, 256), dtype=np.float32))
               for _ in range(a.steps)]
    w = jnp.eye(256, dtype=jnp.float32) * 0.5
    bare(train_step, w, batches[:3])  # compile once, outside the timings
    ratios, aa, bare_times = [], [], []
    for _ in range(a.rounds):
        tb = timed(bare, train_step, w, batches)
        tm = timed(monitored, train_step, w, batches)
        tb2 = timed(bare, train_step, w, batches)
        bare_times += [tb / a.steps, tb2 / a.steps]
        ratios.append(tm / tb)
        aa.append(tb2 / tb)
    step_ms = 1e3 * statistics.median(bare_times)
    print(f"end to end: {a.rounds} rounds x {a.steps} steps (bare, Monitor, bare), "
          f"bare step {step_ms:.1f} ms")
    for label, xs in (("monitored / bare", ratios), ("bare / bare (noise floor)", aa)):
        q = statistics.quantiles(xs, n=4)
        print(f"  {label:26s} median {statistics.median(xs):.4f} "
              f"({100 * (statistics.median(xs) - 1):+.2f}%), IQR {q[0]:.4f}..{q[2]:.4f}")

    def null_step(w, x):
        return w, {"loss": 0.0}

    n = 20_000
    items = list(range(n))
    host = {"bare": [], "Monitor": [], "Monitor, no sync locator": []}
    for _ in range(5):
        host["bare"].append(timed(bare, null_step, 0, items) / n)
        host["Monitor"].append(timed(monitored, null_step, 0, items) / n)
        host["Monitor, no sync locator"].append(
            timed(monitored, null_step, 0, items, locate_syncs=False) / n)
    base = statistics.median(host["bare"])
    print(f"host cost per step (a step with no device work, {n} steps, median of 5):")
    for k, v in host.items():
        med = statistics.median(v)
        extra = "" if k == "bare" else f"  (+{1e6 * (med - base):.1f} us/step over bare)"
        print(f"  {k:26s} {1e6 * med:7.2f} us/step{extra}")
    print(f"  = {100 * (statistics.median(host['Monitor']) - base) / (step_ms / 1e3):.3f}% "
          f"of the {step_ms:.1f} ms step above")

    m = 200_000
    for annotate in (False, True):
        rec = SpanRecorder(annotate=annotate)
        t0 = time.perf_counter()
        for _ in range(m):
            with rec.span("dispatch", step_num=1):
                pass
        dt = (time.perf_counter() - t0) / m
        print(f"span() with annotate={annotate!s:5s} (no profiler capturing): "
              f"{1e9 * dt:.0f} ns/span")


if __name__ == "__main__":
    main()
