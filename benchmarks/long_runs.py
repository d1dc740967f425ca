"""Long runs: time and peak memory of import, diff and plot at 10k, 100k and 1M steps.

    PYTHONPATH=. nice python benchmarks/long_runs.py [--sizes 10000,100000,1000000]
        [--explain-sizes 10000,100000,1000000] [--monitor-steps 1000000]

For each size, two MaxText logs in the real line format are generated in a temporary
directory (``tests/maxtext_log.py``: one ``completed step:`` line per step written one step
late, an async orbax checkpoint every 1000 steps with the lines MaxText and orbax write
around it, whose blocking part stalls the next step; A around 512 ms a step, B around 530
ms), written to disk (``os.sync``, so no writeback of them runs during the timings) and
removed afterwards. Each command runs in its own process, under a 2,000,000 KiB
address-space limit (what ``ulimit -v 2000000`` sets) for import and diff, and reports its
wall time and peak RSS:

- ``pipecheck import A.log --json A.json``
- ``pipecheck diff A.log B.log --json D.json`` (both logs parsed, every row bootstrapped)
- ``pipecheck plot A.json -o A.png``

and, side by side in the same run, a plain regex pass (``REGEX_BASELINE`` searched in every
line, the file read line by line) over A, and over A and B: ``import`` and ``diff`` are
printed as ratios to it (the bar: at most 3x).

Times are wall and CPU (user + system) of the command itself, start-up excluded; CPU
includes the command's child processes (diff reads B in a second process from
``SIDE_BY_SIDE_MIN_BYTES`` on), so on 2 cores diff's CPU time can exceed its wall time.
Peak RSS is per process: the command's, then "+ child" its largest child's (the address
space limit applies to each process on its own). On the
shared 2-core machine the wall time depends on what else runs, so the growth from 100k to
1M steps (at most linear means a ratio of at most 10) is given on the CPU time, which
does not. It prints a table, that growth, the sizes of the import and diff records, and the
Monitor's host cost per step (a step with no device work) over the first 10,000 steps and
over the last 10,000 of a 1,000,000-step loop.

First, the anomaly explanation alone (``maxtext.explain_anomalies`` on a parsed log with a
checkpoint stall every ``EXPLAIN_EVERY`` steps, so many anomalies and many saves): its CPU
time by lookup (what import does) at each of ``--explain-sizes``, and up to
``SCAN_UP_TO`` steps by the scan of every save per anomaly that the lookup replaced (both
give the same anomalies, checked), with the growth between sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]

MEMORY_LIMIT_KIB = 2_000_000
"""The memory import and diff of million-step logs must stay under (``ulimit -v``)."""


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's reaped children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child(argv: list[str]) -> None:
    """Run one pipecheck command in this process; print wall time, CPU time and peak RSS as
    JSON. CPU time includes the command's child processes (diff reads B in a second one,
    reaped before it returns); peak RSS is per process: this one's, and its largest
    child's (which counts the pages it shares with this process since the fork, ~50 MB)."""
    from pipecheck.cli import main

    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu_s()
    code = main(argv)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    child_cpu = _children_cpu_s() - k0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"code": code, "wall_s": wall, "cpu_s": cpu + child_cpu,
                      "child_cpu_s": child_cpu, "peak_rss_mb": peak_kib / 1024,
                      "child_peak_rss_mb": child_peak_kib / 1024}), file=sys.stderr)


def memory(r: dict[str, float]) -> str:
    """A command's peak RSS, and its largest child's where it had one."""
    child = r.get("child_peak_rss_mb", 0.0)
    return f"{r['peak_rss_mb']:.0f} MB" + (f" + child {child:.0f} MB" if child else "")


REGEX_BASELINE = r"completed step:\s*(\d+),\s*seconds:\s*([-+.\deE]+)"
"""The plain pass import and diff are held against: this pattern searched in every line."""


def _regex_child(paths: list[str]) -> None:
    """One plain regex pass over each file (read line by line, the step and its seconds
    taken from every step line): the floor any reader of these logs pays. Prints wall and
    CPU time as JSON, start-up excluded."""
    import re

    pattern = re.compile(REGEX_BASELINE)
    t0, c0 = time.perf_counter(), time.process_time()
    found = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if pattern.search(line):
                    found += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"code": 0, "wall_s": wall, "cpu_s": cpu, "found": found,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
          file=sys.stderr)


def measure(argv: list[str], limit_kib: int | None) -> dict[str, float]:
    def limit() -> None:
        if limit_kib:
            resource.setrlimit(resource.RLIMIT_AS, (limit_kib * 1024, limit_kib * 1024))

    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = "--regex-child" if argv and argv[0] == "regex" else "--child"
    argv = argv[1:] if child == "--regex-child" else argv
    proc = subprocess.run([sys.executable, __file__, child, *argv], preexec_fn=limit,
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
    from pipecheck import Monitor

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


EXPLAIN_EVERY = 100
"""Checkpoint period of the logs the anomaly explanation is timed on: a stall every 100
steps, so a million-step log has 10,000 anomalies and 10,000 async saves."""

EXPLAIN_REPEATS = 3
"""The lookup is timed this many times and the least CPU time kept: at 100k steps it takes
a tenth of a second, where the machine's other work shows."""

SCAN_UP_TO = 100_000
"""The scan is timed up to this many steps only: it grows with the square of the length
(a million steps would take ~100 times its 100k time)."""


def explain_cost(d: str, n: int) -> dict[str, float]:
    """CPU seconds to explain the anomalies of an ``n``-step log with a stall every
    ``EXPLAIN_EVERY`` steps (parsed beforehand, not timed): by lookup (what import does; the
    least of ``EXPLAIN_REPEATS`` runs)
    and, up to ``SCAN_UP_TO`` steps, by the scan of every op per anomaly it replaced."""
    from unittest import mock

    from pipecheck.analysis.logs import maxtext
    from pipecheck.logs.maxtext import parse_lines
    from tests.maxtext_log import write_log

    class ScanLookup:
        """The scan: each step's evidence from every op (``checkpoint_evidence``)."""

        def __init__(self, ops, start, end):
            self.ops, self.start, self.end = ops, start, end

        def evidence(self, row):
            if not np.isfinite(self.end[row]):
                return []
            return maxtext.checkpoint_evidence((float(self.start[row]), float(self.end[row])),
                                               self.ops)

    path = pathlib.Path(d, f"explain_{n}.log")
    write_log(path, n, seed=3, step_s=0.512, checkpoint_every=EXPLAIN_EVERY, stall_s=5.0)
    with open(path) as f:
        p = parse_lines(f)
    path.unlink()
    out: dict[str, float] = {"steps": n}
    out["lookup_s"] = math.inf
    for _ in range(EXPLAIN_REPEATS):
        t0 = time.process_time()
        found, _ = maxtext.explain_anomalies(p.steps, p.events, p.line_at)
        out["lookup_s"] = min(out["lookup_s"], time.process_time() - t0)
    out["anomalies"] = len(found)
    out["explained"] = sum(a.cause != maxtext.CAUSE_UNEXPLAINED for a in found)
    if n <= SCAN_UP_TO:
        with mock.patch.object(maxtext, "BackgroundLookup", ScanLookup):
            t0 = time.process_time()
            scanned, _ = maxtext.explain_anomalies(p.steps, p.events, p.line_at)
            out["scan_s"] = time.process_time() - t0
        if scanned != found:
            raise SystemExit(f"lookup and scan disagree at {n} steps")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--explain-sizes", default="10000,100000,1000000")
    ap.add_argument("--monitor-steps", type=int, default=1_000_000)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.maxtext_log import write_log_pair

    if a.explain_sizes:
        print(f"anomaly explanation (a stall every {EXPLAIN_EVERY} steps), CPU seconds:")
        costs = []
        with tempfile.TemporaryDirectory(prefix="pipecheck_explain_") as d:
            for n in (int(x) for x in a.explain_sizes.split(",")):
                # in its own process, so the Monitor's peak memory below is its own
                proc = subprocess.run([sys.executable, __file__, "--explain-child", d, str(n)],
                                      capture_output=True, text=True, check=False,
                                      env=dict(os.environ, PYTHONPATH=str(REPO)))
                if proc.returncode != 0:
                    raise SystemExit(f"explaining {n} steps failed:\n{proc.stderr[-2000:]}")
                c = json.loads(proc.stdout.splitlines()[-1])
                costs.append(c)
                scan = f"; scan {c['scan_s']:.2f} s" if "scan_s" in c else "; scan not run"
                print(f"  {n:>9,} steps, {c['anomalies']:,.0f} anomalies "
                      f"({c['explained']:,.0f} explained): lookup {c['lookup_s']:.2f} s{scan}",
                      flush=True)
        for c0, c1 in zip(costs, costs[1:], strict=False):
            grow = c1["steps"] / c0["steps"]
            line = (f"  {c0['steps']:,.0f} -> {c1['steps']:,.0f} steps (x{grow:.0f}): "
                    f"lookup x{c1['lookup_s'] / c0['lookup_s']:.1f}")
            if "scan_s" in c0 and "scan_s" in c1:
                line += f", scan x{c1['scan_s'] / c0['scan_s']:.1f}"
            print(line)

    sizes = [int(s) for s in a.sizes.split(",") if s]
    results: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="pipecheck_long_runs_") as d:
        for n in sizes:
            la, lb = write_log_pair(d, n, f"{n}_")
            os.sync()  # the logs on disk before anything is timed: no writeback meanwhile
            rec, png = pathlib.Path(d, f"a_{n}.json"), pathlib.Path(d, f"a_{n}.png")
            diff_rec = pathlib.Path(d, f"diff_{n}.json")
            r = {
                "regex": measure(["regex", str(la)], MEMORY_LIMIT_KIB),
                "import": measure(["import", str(la), "--json", str(rec)], MEMORY_LIMIT_KIB),
                "regex2": measure(["regex", str(la), str(lb)], MEMORY_LIMIT_KIB),
                "diff": measure(["diff", str(la), str(lb), "--json", str(diff_rec)],
                                MEMORY_LIMIT_KIB),
                "plot": measure(["plot", str(rec), "-o", str(png)], None),
            }
            r["import"]["record_mb"] = rec.stat().st_size / 1e6
            r["import"]["log_mb"] = la.stat().st_size / 1e6
            r["diff"]["record_mb"] = diff_rec.stat().st_size / 1e6
            results[n] = r
            print(f"{n:>9,} steps: " + "; ".join(
                f"{k} {v['wall_s']:.1f} s (CPU {v['cpu_s']:.1f} s), {memory(v)}"
                for k, v in r.items())
                + f"; log {r['import']['log_mb']:.0f} MB, record {r['import']['record_mb']:.1f} MB"
                + f", diff --json {r['diff']['record_mb']:.1f} MB", flush=True)
            for p in (la, lb, rec, png, diff_rec):
                p.unlink()

    if sizes:
        table(sizes, results)
        ratio_table(sizes, results)
    if a.monitor_steps:
        monitor_table(a.monitor_steps)


def ratio_table(sizes: list[int], results: dict[int, dict[str, dict[str, float]]]) -> None:
    """import against one regex pass over its log, diff against one over both logs,
    measured side by side in this run (wall and CPU)."""
    print("\nagainst a plain regex pass over the same file(s) in this run "
          "(import: A; diff: A and B), wall (CPU):")
    for n in sizes:
        r = results[n]
        cells = []
        for cmd, base in (("import", "regex"), ("diff", "regex2")):
            cells.append(f"{cmd} x{r[cmd]['wall_s'] / r[base]['wall_s']:.2f} "
                         f"(x{r[cmd]['cpu_s'] / r[base]['cpu_s']:.2f}; regex "
                         f"{r[base]['wall_s']:.2f} s)")
        print(f"  {n:>9,} steps: " + "; ".join(cells))


def table(sizes: list[int], results: dict[int, dict[str, dict[str, float]]]) -> None:
    print("\n| command | " + " | ".join(f"{n:,} steps" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for cmd in ("import", "diff", "plot"):
        cells = [f"{results[n][cmd]['wall_s']:.1f} s (CPU {results[n][cmd]['cpu_s']:.1f} s), "
                 f"{memory(results[n][cmd])}" for n in sizes]
        print(f"| `{cmd}` | " + " | ".join(cells) + " |")
    print("| `import --json` record | " + " | ".join(
        f"{results[n]['import']['record_mb']:.1f} MB" for n in sizes) + " |")
    print("| `diff --json` record | " + " | ".join(
        f"{results[n]['diff']['record_mb']:.1f} MB" for n in sizes) + " |")
    if 100_000 in results and 1_000_000 in results:
        print("\ntime growth 100k -> 1M steps (10 = linear), CPU (wall):")
        for cmd in ("import", "diff", "plot"):
            big, small = results[1_000_000][cmd], results[100_000][cmd]
            print(f"  {cmd:7s} x{big['cpu_s'] / small['cpu_s']:.1f} "
                  f"(x{big['wall_s'] / small['wall_s']:.1f})")


def monitor_table(steps: int) -> None:
    costs = monitor_cost(steps)
    by_end = dict(costs)
    print(f"\nMonitor host cost per step (a step with no device work), one "
          f"{steps:,}-step loop, us/step over each 10,000 steps ending at:")
    for end in sorted({10_000, 20_000, costs[len(costs) // 2][0], costs[-1][0]}):
        if end in by_end:
            print(f"  step {end:>9,}: {by_end[end]:6.1f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS of this process {peak_mb:.0f} MB")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--regex-child":
        _regex_child(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--explain-child":
        sys.path.insert(0, str(REPO))
        print(json.dumps(explain_cost(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
