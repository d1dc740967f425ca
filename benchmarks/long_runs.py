"""Long runs: time and peak memory of import, diff and plot at 10k, 100k and 1M steps.

    PYTHONPATH=. nice python benchmarks/long_runs.py [--sizes 10000,100000,1000000]

For each size, two MaxText logs in the real line format are generated in a temporary
directory (``tests/maxtext_log.py``: one ``completed step:`` line per step, a checkpoint
every 1000 steps; A around 512 ms a step, B around 530 ms) and removed afterwards. Each
command runs in its own process, under a 2,000,000 KiB address-space limit (what
``ulimit -v 2000000`` sets) for import and diff, and reports its wall time and peak RSS:

- ``pipecheck import A.log --json A.json``
- ``pipecheck diff A.log B.log`` (both logs parsed, every row bootstrapped)
- ``pipecheck plot A.json -o A.png``

Times are wall and CPU (user + system) of the command itself, start-up excluded. On the
shared 2-core machine the wall time depends on what else runs, so the growth from 100k to
1M steps (at most linear means a ratio of at most 10) is given on the CPU time, which
does not. It prints a table, that growth, the size of the 1M-step record, and the Monitor's
host cost per step (a step with no device work) over the first 10,000 steps and over the
last 10,000 of a 1,000,000-step loop.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

MEMORY_LIMIT_KIB = 2_000_000
"""The limit the issue sets for import and diff of million-step logs (``ulimit -v``)."""


def _child(argv: list[str]) -> None:
    """Run one pipecheck command in this process; print wall time and peak RSS as JSON."""
    from pipecheck.cli import main

    t0, c0 = time.perf_counter(), time.process_time()
    code = main(argv)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"code": code, "wall_s": wall, "cpu_s": cpu,
                      "peak_rss_mb": peak_kib / 1024}), file=sys.stderr)


def measure(argv: list[str], limit_kib: int | None) -> dict[str, float]:
    def limit() -> None:
        if limit_kib:
            resource.setrlimit(resource.RLIMIT_AS, (limit_kib * 1024, limit_kib * 1024))

    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, __file__, "--child", *argv], preexec_fn=limit,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"pipecheck {' '.join(argv)} failed ({proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    out: dict[str, float] = json.loads(lines[-1])
    if out["code"] != 0:
        raise SystemExit(f"pipecheck {' '.join(argv)} exited {out['code']}:\n{proc.stderr}")
    return out


def monitor_cost(steps: int, every: int = 10_000) -> list[tuple[int, float]]:
    """(step, µs per step over the ``every`` steps before it) through a Monitor loop."""
    from pipecheck.measure.monitor import Monitor

    marks: list[tuple[int, float]] = []

    def items():
        for i in range(steps):
            if i % every == 0:
                marks.append((i, time.perf_counter()))
            yield i
        marks.append((steps, time.perf_counter()))

    def null_step(w, x):
        return w, {"loss": 0.0}

    mon = Monitor(env={"benchmark": True})
    w = 0
    for x in mon.batches(items()):
        w, _ = mon.step(null_step, w, x)
    mon.finish()
    return [(s1, 1e6 * (t1 - t0) / (s1 - s0))
            for (s0, t0), (s1, t1) in zip(marks, marks[1:], strict=False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--monitor-steps", type=int, default=1_000_000)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.maxtext_log import write_log

    sizes = [int(s) for s in a.sizes.split(",")]
    results: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="pipecheck_long_runs_") as d:
        for n in sizes:
            la, lb = pathlib.Path(d, f"a_{n}.log"), pathlib.Path(d, f"b_{n}.log")
            write_log(la, n, seed=1, step_s=0.512)
            write_log(lb, n, seed=2, step_s=0.530)
            rec, png = pathlib.Path(d, f"a_{n}.json"), pathlib.Path(d, f"a_{n}.png")
            r = {
                "import": measure(["import", str(la), "--json", str(rec)], MEMORY_LIMIT_KIB),
                "diff": measure(["diff", str(la), str(lb)], MEMORY_LIMIT_KIB),
                "plot": measure(["plot", str(rec), "-o", str(png)], None),
            }
            r["import"]["record_mb"] = rec.stat().st_size / 1e6
            r["import"]["log_mb"] = la.stat().st_size / 1e6
            results[n] = r
            print(f"{n:>9,} steps: " + "; ".join(
                f"{k} {v['wall_s']:.1f} s (CPU {v['cpu_s']:.1f} s), {v['peak_rss_mb']:.0f} MB"
                for k, v in r.items())
                + f"; log {r['import']['log_mb']:.0f} MB, record {r['import']['record_mb']:.1f} MB",
                flush=True)
            for p in (la, lb, rec, png):
                p.unlink()

    print("\n| command | " + " | ".join(f"{n:,} steps" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for cmd in ("import", "diff", "plot"):
        cells = [f"{results[n][cmd]['wall_s']:.1f} s (CPU {results[n][cmd]['cpu_s']:.1f} s), "
                 f"{results[n][cmd]['peak_rss_mb']:.0f} MB" for n in sizes]
        print(f"| `{cmd}` | " + " | ".join(cells) + " |")
    print("| record size | " + " | ".join(f"{results[n]['import']['record_mb']:.1f} MB"
                                          for n in sizes) + " |")
    if 100_000 in results and 1_000_000 in results:
        print("\ntime growth 100k -> 1M steps (10 = linear), CPU (wall):")
        for cmd in ("import", "diff", "plot"):
            big, small = results[1_000_000][cmd], results[100_000][cmd]
            print(f"  {cmd:7s} x{big['cpu_s'] / small['cpu_s']:.1f} "
                  f"(x{big['wall_s'] / small['wall_s']:.1f})")

    if a.monitor_steps:
        costs = monitor_cost(a.monitor_steps)
        by_end = dict(costs)
        print(f"\nMonitor host cost per step (a step with no device work), one "
              f"{a.monitor_steps:,}-step loop, us/step over each 10,000 steps ending at:")
        for end in sorted({10_000, 20_000, costs[len(costs) // 2][0], costs[-1][0]}):
            if end in by_end:
                print(f"  step {end:>9,}: {by_end[end]:6.1f}")
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  peak RSS of this process {peak_mb:.0f} MB")

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
