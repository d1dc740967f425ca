"""How often the default ``pipecheck diff`` calls identical runs different (A/A), and the
smallest step-time change it detects, on real runs.

Every run is a fresh ``pipecheck synthetic --set workload=calibrated`` process at the
default steps (its own start-up and compile), so a pair carries what differs between two
real runs of one workload: compile, and the machine's load at the time. The chain is sized
once, to ``BASE_MS``, and fixed for every run (``chain_iters``): two runs of a user's
workload do the same work, where two calibrations on a busy machine would not. (a) A/A:
pairs at the same chain; a false verdict is an outcome ``significant``. (b) Power: B's
chain ``1 + change`` times as long; detected is ``significant`` with B slower. The smallest
change detected in at least ``POWER`` of pairs is printed. Resampling recorded step times
would miss the run-to-run part, the part a user's two runs differ by; so real runs are used.

``--runs-per-side K`` makes each side of a pair K fresh runs, diffed as ``pipecheck diff``
diffs two folders of runs (``analysis.diff.diff_sides``: the runs' medians tested against
each other, the between-run spread measured rather than floored by ``--min-change``).

    python benchmarks/diff_power.py [--pairs 15] [--power-pairs 8] [--changes 0.03,0.05,0.1]
        [--aa-workload calibrated|demo] [--runs-per-side 1]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from pipecheck.analysis.diff import diff_sides, summary_from_record

BASE_MS = 20.0
POWER = 0.8
"""Detected in at least 80% of pairs: the usual power a test is sized for."""


def run(sets: list[str], out: pathlib.Path) -> dict:
    """One fresh ``pipecheck synthetic`` run with these ``--set`` values."""
    cmd = [sys.executable, "-m", "pipecheck", "synthetic", "--json", str(out), "--quiet",
           "--force", *(x for kv in sets for x in ("--set", kv))]
    subprocess.run(cmd, check=True, capture_output=True, env=os.environ)
    return json.loads(out.read_text())


def chain_iters(d: pathlib.Path) -> int:
    """The chain length one calibrated run sized to ``BASE_MS`` (from its FLOPs per step:
    2 x batch x dim^2 per iteration), fixed for every run after it: two runs of a user's
    workload do the same work, so the pairs must too."""
    data = run(["workload=calibrated", f"compute_ms={BASE_MS}"], d / "sizing.json")
    cfg = data["config"]
    per_iter = 2.0 * cfg["batch_size"] * cfg["feature_dim"] ** 2
    return max(1, round(data["throughput"]["flops_per_step"] / per_iter))


def sets_of(iters: int | None) -> list[str]:
    """The calibrated workload at a fixed chain of ``iters``, or the demo for None."""
    return ["workload=demo"] if iters is None else ["workload=calibrated",
                                                    f"chain_iters={iters}"]


def outcome(a_iters: int | None, b_iters: int | None, d: pathlib.Path, k: int = 1
            ) -> tuple[str, float]:
    """The default diff's outcome and relative change of B against A, each side ``k`` fresh
    runs (alternated, A then B, so a drift of the machine falls on both); printed with the
    cores other programs used during each run's steps."""
    side_a, side_b = [], []
    for i in range(k):
        side_a.append(summary_from_record(run(sets_of(a_iters), d / f"a{i}.json"), f"A{i}"))
        side_b.append(summary_from_record(run(sets_of(b_iters), d / f"b{i}.json"), f"B{i}"))
    result = diff_sides(side_a, side_b)
    between = result.between_runs
    rel = (between.relative if between is not None
           else result.row("step time median").relative) or 0.0
    print(f"  pair: {rel:+.1%} {result.outcome}; other programs' cores during A "
          f"{', '.join(_cores(s.other_cores) for s in side_a)}, B "
          f"{', '.join(_cores(s.other_cores) for s in side_b)}", flush=True)
    return result.outcome, rel


def _cores(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--power-pairs", type=int, default=8)
    p.add_argument("--changes", default="0.03,0.05,0.1")
    p.add_argument("--aa-workload", choices=("calibrated", "demo"), default="calibrated",
                   help="the A/A pairs' workload (calibrated: a fixed chain; demo: a model)")
    p.add_argument("--runs-per-side", type=int, default=1,
                   help="fresh runs on each side of a pair (1: the diff of two runs)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        iters = chain_iters(d)
        print(f"calibrated: a chain of {iters} iterations (sized once to {BASE_MS:g} ms), "
              "the same in every run")
        base = iters if args.aa_workload == "calibrated" else None
        k = args.runs_per_side
        aa = [outcome(base, base, d, k) for _ in range(args.pairs)]
        false = sum(o == "significant" for o, _ in aa)
        inconclusive = sum(o == "inconclusive" for o, _ in aa)
        print(f"A/A ({args.aa_workload}, {k} run(s) a side): {false}/{len(aa)} pairs "
              f"significant (false verdicts: "
              f"{false / len(aa):.0%}); inconclusive {inconclusive}; |change| median "
              f"{sorted(abs(r) for _, r in aa)[len(aa) // 2]:.1%}")
        smallest = None
        for change in (float(c) for c in args.changes.split(",") if c):
            got = [outcome(iters, round(iters * (1 + change)), d, k)
                   for _ in range(args.power_pairs)]
            hit = sum(o == "significant" and r > 0 for o, r in got)
            print(f"change +{change:.0%}: detected {hit}/{len(got)} "
                  f"(measured changes: {', '.join(f'{r:+.1%}' for _, r in got)})")
            if smallest is None and hit >= POWER * len(got):
                smallest = change
        print("smallest change detected in >= 80% of pairs: "
              + (f"{smallest:.0%}" if smallest is not None else "none of those tried"))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
