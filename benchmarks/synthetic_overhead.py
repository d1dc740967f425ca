"""Overhead of pipecheck's step timing: the same workload bare and under the timed loop.

Runs alternating pairs on one calibrated workload:
  bare:      for each step: state, m = step(state, batch); block once at the end
  pipecheck: run_lagged_sync_loop (spans, lagged sync of the previous loss, compile watch)
and prints the wall-time ratio pipecheck/bare per pair, its median and a bootstrap
interval. It also measures the instrumentation's own host cost per step with a no-op
step, which bounds the overhead independently of machine noise.

    python benchmarks/synthetic_overhead.py [--pairs 10] [--steps 40] [--compute-ms 20]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from pipecheck import stats
from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.loop import run_lagged_sync_loop
from pipecheck.measure.spans import SpanRecorder
from pipecheck.workloads import build_workload, resolve


def bare(workload, state, batch, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        state, m = workload.train_step(state, batch)
    m["loss"].block_until_ready()
    return time.perf_counter() - t0, state


def timed(workload, state, batch, steps):
    t0 = time.perf_counter()
    with CompileWatcher(workload.train_step_name, time.perf_counter) as w:
        out = run_lagged_sync_loop(workload.train_step, state, itertools.repeat(batch), steps,
                                   SpanRecorder(), compiles=lambda: w.compiles)
    return time.perf_counter() - t0, out.state


def instrumentation_cost_per_step(n=20000):
    """Host seconds per step that the timed loop adds around a step that costs nothing."""
    def noop(state, batch):
        return state, {"loss": 0.0}

    t0 = time.perf_counter()
    for _ in range(n):
        noop(0, 0)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_lagged_sync_loop(noop, 0, itertools.repeat(0), n, SpanRecorder())
    return (time.perf_counter() - t0 - base) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--compute-ms", type=float, default=20.0)
    args = ap.parse_args()
    cfg = resolve({"workload": "calibrated", "compute_ms": args.compute_ms})
    wl = build_workload(cfg)
    state = wl.init_state()
    batch = wl.put(wl.host_batch())
    _, state = bare(wl, state, batch, 5)  # compile and warm up
    ratios, bare_step = [], []
    for i in range(args.pairs):
        order = (bare, timed) if i % 2 == 0 else (timed, bare)
        t = {}
        for fn in order:
            t[fn.__name__], state = fn(wl, state, batch, args.steps)
        ratios.append(t["timed"] / t["bare"])
        bare_step.append(t["bare"] / args.steps)
    lo, hi = stats.median_ci(ratios)
    per_step = instrumentation_cost_per_step()
    step_s = statistics.median(bare_step)
    print(f"workload: calibrated compute_ms={args.compute_ms:g}, {args.pairs} alternating pairs "
          f"x {args.steps} steps")
    print(f"bare step time (median):            {step_s * 1000:.2f} ms")
    print("wall-time ratio pipecheck/bare:     "
          + " ".join(f"{r:.3f}" for r in ratios))
    print(f"median ratio:                       {statistics.median(ratios):.4f} "
          f"(95% CI {lo:.4f} .. {hi:.4f})")
    print(f"instrumentation host cost per step: {per_step * 1e6:.1f} us "
          f"= {100 * per_step / step_s:.3f}% of the step time")


if __name__ == "__main__":
    main()
