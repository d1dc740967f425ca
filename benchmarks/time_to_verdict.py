"""Time to verdict: the default ``pipecheck compare`` from a fresh start, demo corpus included.

Each round runs ``python -m pipecheck compare`` twice in subprocesses: first with an empty
data directory (``PIPECHECK_DATA_DIR`` set to a new temporary directory, as on a fresh
machine: the demo corpus is built), then again with the corpus that run built (cached).
It prints, per run, the wall time, the CPU time (user + system of the process and its
children) and the machine's 1-minute load average before and after, then the medians and
the corpus build's share (fresh minus cached, side by side in the same round).

    PYTHONPATH=. python benchmarks/time_to_verdict.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def _load() -> float:
    return os.getloadavg()[0]


def run_compare(data_dir: str) -> tuple[float, float, str]:
    """Wall and CPU seconds of one default ``pipecheck compare``, and its verdict line."""
    env = dict(os.environ, PIPECHECK_DATA_DIR=data_dir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pipecheck", "compare"], env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"pipecheck compare failed ({proc.returncode}): {proc.stderr[-500:]}")
    verdict = next((line for line in proc.stdout.splitlines()
                    if line.startswith("pipecheck compare:")), "?")
    return wall, cpu, verdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    fresh, cached = [], []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="pipecheck-ttv-") as data_dir:
            for label, runs in (("fresh", fresh), ("cached", cached)):
                load0 = _load()
                wall, cpu, verdict = run_compare(data_dir)
                runs.append((wall, cpu))
                print(f"round {r + 1} {label:<7} wall {wall:6.1f} s  CPU {cpu:6.1f} s  "
                      f"load {load0:.1f} -> {_load():.1f}  {verdict}")
    for label, runs in (("fresh", fresh), ("cached", cached)):
        print(f"median {label:<7} wall {statistics.median(w for w, _ in runs):6.1f} s  "
              f"CPU {statistics.median(c for _, c in runs):6.1f} s")
    build = [f[0] - c[0] for f, c in zip(fresh, cached, strict=True)]
    print(f"demo corpus build (fresh - cached, per round): median {statistics.median(build):.1f} s "
          f"wall")


if __name__ == "__main__":
    main()
