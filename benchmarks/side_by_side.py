"""Where a second process starts to pay: reading diff's two inputs side by side
(``load_runs`` with B in a second process against one after the other), and reading one
log in two halves at once (``maxtext.parse_file``, what ``import`` does, against one
pass), at growing log sizes.

    PYTHONPATH=. nice python benchmarks/side_by_side.py [--steps 1000,2000,5000,...]
        [--repeats 7] [--transfer-steps 1000000] [--halves-steps 20000,50000,...]

For each size, two MaxText logs (``tests/maxtext_log.py``, A around 512 ms a step, B around
530 ms) are written to a temporary directory, and ``load_runs(A, B)`` is timed with the
second process forced (``min_bytes=0``) and refused (``min_bytes`` above any size),
alternating, ``--repeats`` times each; the median wall times and their ratio are printed
with the logs' size. ``SIDE_BY_SIDE_MIN_BYTES`` is chosen from where the ratio stays under
1. Then the hand-back alone: a ``--transfer-steps`` log read in a child, timed from the
child's first pickled bytes to the summary in the parent's hands (the child's pickling,
the pipe, the parent's unpickling), and the pickled size. Last, for each of
``--halves-steps``, one log parsed in two halves (``min_bytes=0``) and in one pass,
alternating, ``--repeats`` times each: ``HALVES_MIN_BYTES`` is chosen from where the ratio
stays under 1.
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipecheck.logs.maxtext import parse_file  # noqa: E402
from pipecheck.logs.side_by_side import ChildRead, load_runs  # noqa: E402
from tests.maxtext_log import write_log, write_log_pair  # noqa: E402

NEVER = 1 << 62
"""``min_bytes`` no file reaches: one after the other."""


def time_sizes(d: str, sizes: list[int], repeats: int) -> None:
    print("steps    log MB   side by side   one after the other   ratio")
    for n in sizes:
        a, b = write_log_pair(d, n, f"{n}_")
        times: dict[str, list[float]] = {"side": [], "seq": []}
        for _ in range(repeats):
            for mode, limit in (("side", 0), ("seq", NEVER)):
                t0 = time.perf_counter()
                load_runs(a, b, min_bytes=limit)
                times[mode].append(time.perf_counter() - t0)
        side, seq = statistics.median(times["side"]), statistics.median(times["seq"])
        print(f"{n:>8,} {a.stat().st_size / 2**20:7.2f}   {side * 1e3:9.1f} ms   "
              f"{seq * 1e3:14.1f} ms      {side / seq:5.2f}", flush=True)
        a.unlink()
        b.unlink()


def time_transfer(d: str, n: int) -> None:
    path = pathlib.Path(d, "transfer.log")
    write_log(path, n, seed=2, step_s=0.530)
    child = ChildRead.start(path)
    try:
        child._pipe.peek(1)  # the child's first bytes: its read is over, its pickling began
        t0, c0 = time.perf_counter(), time.process_time()
        run = child.result()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        child.reap()
    size = len(pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL))
    print(f"\nhand-back of a {n:,}-step run: {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU "
          f"in the parent (pipe and unpickling), {size / 1e6:.1f} MB pickled")


def time_halves(d: str, sizes: list[int], repeats: int) -> None:
    print("\nsteps    log MB   in halves      one pass              ratio")
    for n in sizes:
        log = pathlib.Path(d, f"h_{n}.log")
        write_log(log, n, seed=1, step_s=0.512)
        times: dict[str, list[float]] = {"halves": [], "one": []}
        for _ in range(repeats):
            for mode, limit in (("halves", 0), ("one", NEVER)):
                t0 = time.perf_counter()
                parse_file(log, min_bytes=limit)
                times[mode].append(time.perf_counter() - t0)
        halves, one = statistics.median(times["halves"]), statistics.median(times["one"])
        print(f"{n:>8,} {log.stat().st_size / 2**20:7.2f}   {halves * 1e3:9.1f} ms   "
              f"{one * 1e3:14.1f} ms      {halves / one:5.2f}", flush=True)
        log.unlink()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="1000,2000,5000,10000,20000,50000,100000")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--transfer-steps", type=int, default=1_000_000)
    ap.add_argument("--halves-steps", default="10000,20000,50000,100000,150000,200000")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pipecheck_side_by_side_") as d:
        time_sizes(d, [int(s) for s in a.steps.split(",") if s], a.repeats)
        if a.transfer_steps:
            time_transfer(d, a.transfer_steps)
        time_halves(d, [int(s) for s in a.halves_steps.split(",") if s], a.repeats)


if __name__ == "__main__":
    main()
