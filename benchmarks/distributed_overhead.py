"""Per-host overhead of pipecheck's distributed mode: does measuring on N processes slow
any host's steps?

While a multi-process run measures, pipecheck adds exactly one thing to each host: the
heartbeat thread (every 0.5 s it writes this host's counter to JAX's key-value store and
reads the others'). The config check and the gather run before and after the timed loop.
This script starts N local processes joined by jax.distributed (gloo on CPU); each trains
the calibrated workload (a real cross-process all-reduce per step) in alternating blocks
with the heartbeat off and on, timed by pipecheck's own lagged-sync loop, and process 0
prints the per-pair ratio of median step times (on / off), its median and range.

    python benchmarks/distributed_overhead.py [--processes 2] [--pairs 8] [--steps 30]
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import statistics
import subprocess
import sys


def child(pid: int, n: int, port: int, pairs: int, steps: int, compute_ms: float) -> None:
    import absl.flags

    absl.flags.FLAGS.mark_as_parsed()
    from pipecheck.measure import distributed
    from pipecheck.measure.loop import run_lagged_sync_loop, steady_state
    from pipecheck.measure.spans import SpanRecorder
    from pipecheck.workloads import build_workload, resolve

    def fatal(message: str, code: int) -> None:
        print(f"process {pid}: {message}", file=sys.stderr, flush=True)
        os._exit(code)

    opts = distributed.DistributedOptions(f"127.0.0.1:{port}", n, pid, timeout_s=60)
    distributed.initialize(opts, fatal)
    cfg = resolve({"workload": "calibrated", "compute_ms": compute_ms, "feature_dim": 128,
                   "batch_size": 8 * n})
    wl = build_workload(cfg)
    state = wl.init_state()
    batch = wl.put(wl.host_batch())

    def median_step() -> float:
        nonlocal state
        out = run_lagged_sync_loop(wl.train_step, state, itertools.repeat(batch), steps,
                                   SpanRecorder())
        state = out.state
        return statistics.median(s.time_s for s in steady_state(out.steps))

    median_step()  # compile and warm up
    ratios = []
    for i in range(pairs):
        order = ("off", "on") if i % 2 == 0 else ("on", "off")
        times = {}
        for mode in order:
            session = distributed.Session(60.0)
            if mode == "on":
                session.watch(fatal)
            times[mode] = median_step()
            session.close()
        ratios.append(times["on"] / times["off"])
        if pid == 0:
            print(f"pair {i}: off {times['off'] * 1e3:.1f} ms, on {times['on'] * 1e3:.1f} ms, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
    # The bound that does not depend on machine noise: the host time of one heartbeat
    # round (write + read the peers'), paid every HEARTBEAT_PERIOD_S on a helper thread.
    import time

    beat = distributed.Heartbeat(distributed.KeyValueStore(), pid, n, 60.0, fatal)
    costs = []
    for _ in range(50):
        t0 = time.thread_time()
        beat.beat()
        costs.append(time.thread_time() - t0)
    cost = statistics.median(costs)
    if pid == 0:
        print(f"one heartbeat round: {cost * 1e3:.2f} ms of CPU every "
              f"{distributed.HEARTBEAT_PERIOD_S:g} s "
              f"({100 * cost / distributed.HEARTBEAT_PERIOD_S:.2f}% of one core)", flush=True)
        print(f"{n} processes, {pairs} pairs of {steps} steps: step time with the heartbeat / "
              f"without: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f} .. {max(ratios):.3f})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--compute-ms", type=float, default=20.0)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.processes, args.port, args.pairs, args.steps, args.compute_ms)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, __file__, "--child", str(i), "--port", str(port),
                               "--processes", str(args.processes), "--pairs", str(args.pairs),
                               "--steps", str(args.steps), "--compute-ms",
                               str(args.compute_ms)])
             for i in range(args.processes)]
    try:
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
