"""How often the default ``pipecheck diff`` calls identical runs different (A/A), and the
smallest step-time change it detects, on real runs.

Every run is a fresh ``pipecheck synthetic --set workload=calibrated`` process at the
default steps (its own start-up and compile), so a pair carries what differs between two
real runs of one workload: compile, and the machine's load at the time. The chain is sized
once, to ``BASE_MS``, and fixed for every run (``chain_iters``): two runs of a user's
workload do the same work, where two calibrations on a busy machine would not. (a) A/A:
pairs at the same chain; a false verdict is an outcome ``significant``. (b) Power: B's
chain made longer by what makes its *step time* ``1 + change`` times A's (``marginal``: the
chain's cost per iteration measured at two lengths; a step's fixed part, dispatch and the
host's sync, does not grow with the chain, so ``1 + change`` times the work is less than
that change of the step); detected is ``significant`` with B slower. The smallest change
detected in at least ``POWER`` of pairs is printed. Resampling recorded step times would
miss the run-to-run part, the part a user's two runs differ by; so real runs are used.

``--runs-per-side K`` makes each side of a pair K fresh runs, diffed as ``pipecheck diff``
diffs two folders of runs (``analysis.diff.diff_sides``: the runs' medians tested against
each other, the between-run spread measured rather than floored by ``--min-change``).
``--min-change 0.04,0.05`` judges every pair at each of those floors (the runs are the
same; only the verdict's floor differs): the first is the one printed beside each pair.

With the A/A pairs it prints where their spread comes from: the runs' medians' spread
(the coefficient of variation across every A/A run) against each median's own uncertainty
within its run (half its 95% bootstrap interval over 1.96, relative). More steps a run
(``--steps``) narrow only the second.

    python benchmarks/diff_power.py [--pairs 15] [--power-pairs 8] [--changes 0.03,0.05,0.1]
        [--aa-workload calibrated|demo] [--runs-per-side 1] [--steps 40]
        [--min-change F[,F...]]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from pipecheck.analysis.diff import diff_sides, summary_from_record
from pipecheck.records.diff import RunSummary

BASE_MS = 20.0
POWER = 0.8
"""Detected in at least 80% of pairs: the usual power a test is sized for."""

STEPS: int | None = None
"""``--steps`` for every run (None: synthetic's default)."""


def run(sets: list[str], out: pathlib.Path) -> dict:
    """One fresh ``pipecheck synthetic`` run with these ``--set`` values."""
    cmd = [sys.executable, "-m", "pipecheck", "synthetic", "--json", str(out), "--quiet",
           "--force", *(x for kv in sets for x in ("--set", kv)),
           *(("--steps", str(STEPS)) if STEPS is not None else ())]
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


def marginal(iters: int, d: pathlib.Path, runs: int = 3) -> tuple[float, float]:
    """The step time at ``iters`` and what one more iteration adds to it (seconds): the
    medians of ``runs`` runs at ``iters`` and at twice it, alternated."""
    at: dict[int, list[float]] = {iters: [], 2 * iters: []}
    for i in range(runs):
        for n in at:
            rec = run(sets_of(n), d / f"marginal{n}_{i}.json")
            at[n].append(rec["step_time"]["median_s"])
    base, double = statistics.median(at[iters]), statistics.median(at[2 * iters])
    return base, (double - base) / iters


def longer_by(iters: int, change: float, step_s: float, per_iter_s: float) -> int:
    """The chain whose step time is ``1 + change`` times that at ``iters``."""
    return iters + max(1, round(change * step_s / per_iter_s))


def sets_of(iters: int | None) -> list[str]:
    """The calibrated workload at a fixed chain of ``iters``, or the demo for None."""
    return ["workload=demo"] if iters is None else ["workload=calibrated",
                                                    f"chain_iters={iters}"]


def outcome(a_iters: int | None, b_iters: int | None, d: pathlib.Path,
            floors: list[float | None],
            k: int = 1) -> tuple[list[str], float, list[RunSummary]]:
    """The diff's outcome at each floor of ``floors`` (its ``--min-change``; None: its
    default) and the relative change of B against A, each side ``k`` fresh runs
    (alternated, A then B, so a drift of the machine falls on both); printed with the cores
    other programs used during each run's steps. Also every run's summary."""
    side_a, side_b = [], []
    for i in range(k):
        side_a.append(summary_from_record(run(sets_of(a_iters), d / f"a{i}.json"), f"A{i}"))
        side_b.append(summary_from_record(run(sets_of(b_iters), d / f"b{i}.json"), f"B{i}"))
    results = [diff_sides(side_a, side_b, min_change=f) for f in floors]
    between = results[0].between_runs
    rel = (between.relative if between is not None
           else results[0].row("step time median").relative) or 0.0
    print(f"  pair: {rel:+.1%} {results[0].outcome}; other programs' cores during A "
          f"{', '.join(_cores(s.other_cores) for s in side_a)}, B "
          f"{', '.join(_cores(s.other_cores) for s in side_b)}", flush=True)
    return [r.outcome for r in results], rel, [*side_a, *side_b]


def spread_of(runs: list[RunSummary]) -> tuple[float, float]:
    """The runs' steady medians' coefficient of variation, and the median over the runs of
    each median's own relative standard error (its 95% bootstrap interval's half-width over
    1.96): between runs against within one."""
    medians = [r.step_time.summary.median for r in runs]
    within = []
    for r in runs:
        low, high = r.step_time.median_ci()
        within.append((high - low) / 2 / 1.96 / r.step_time.summary.median)
    return statistics.stdev(medians) / statistics.fmean(medians), statistics.median(within)


def _cores(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}"


def _floor_name(floor: float | None) -> str:
    return "the default --min-change" if floor is None else f"--min-change {floor:.0%}"


def _arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--power-pairs", type=int, default=8)
    p.add_argument("--changes", default="0.03,0.05,0.1")
    p.add_argument("--aa-workload", choices=("calibrated", "demo"), default="calibrated",
                   help="the A/A pairs' workload (calibrated: a fixed chain; demo: a model)")
    p.add_argument("--runs-per-side", type=int, default=1,
                   help="fresh runs on each side of a pair (1: the diff of two runs)")
    p.add_argument("--steps", type=int, default=None,
                   help="synthetic's --steps for every run (default: its own default)")
    p.add_argument("--min-change", default=None,
                   help="the diff's --min-change, fractions separated by commas, each "
                        "judged on the same pairs (default: the diff's own)")
    return p.parse_args()


def main() -> None:
    global STEPS
    args = _arguments()
    STEPS = args.steps
    floors: list[float | None] = ([float(f) for f in args.min_change.split(",")]
                                  if args.min_change else [None])
    k = args.runs_per_side
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        iters = chain_iters(d)
        step_s, per_iter_s = marginal(iters, d)
        print(f"calibrated: a chain of {iters} iterations (sized once to {BASE_MS:g} ms), "
              f"the same in every run; its step {step_s * 1e3:.2f} ms, "
              f"{per_iter_s * 1e6:.2f} us an iteration more")
        base = iters if args.aa_workload == "calibrated" else None
        aa = [outcome(base, base, d, floors, k) for _ in range(args.pairs)]
        between, within = spread_of([r for _, _, runs in aa for r in runs])
        print(f"A/A ({args.aa_workload}, {k} run(s) a side, steps {STEPS or 'default'}): "
              f"|change| median {sorted(abs(r) for _, r, _ in aa)[len(aa) // 2]:.1%}; "
              f"the runs' medians spread {between:.2%} (CV) between runs, each median's "
              f"own uncertainty {within:.2%} (standard error) within its run")
        for j, floor in enumerate(floors):
            false = sum(o[j] == "significant" for o, _, _ in aa)
            inconclusive = sum(o[j] == "inconclusive" for o, _, _ in aa)
            print(f"  at {_floor_name(floor)}: {false}/{len(aa)} pairs significant (false "
                  f"verdicts: {false / len(aa):.0%}); inconclusive {inconclusive}")
        smallest: list[float | None] = [None] * len(floors)
        for change in (float(c) for c in args.changes.split(",") if c):
            b_iters = longer_by(iters, change, step_s, per_iter_s)
            print(f"change +{change:.0%} of the step: B's chain {b_iters} iterations")
            got = [outcome(iters, b_iters, d, floors, k) for _ in range(args.power_pairs)]
            print(f"  measured changes: {', '.join(f'{r:+.1%}' for _, r, _ in got)}")
            for j, floor in enumerate(floors):
                hit = sum(o[j] == "significant" and r > 0 for o, r, _ in got)
                print(f"  at {_floor_name(floor)}: detected {hit}/{len(got)}")
                if smallest[j] is None and hit >= POWER * len(got):
                    smallest[j] = change
        for floor, small in zip(floors, smallest, strict=True):
            print(f"smallest change detected in >= 80% of pairs at {_floor_name(floor)}: "
                  + (f"{small:.0%}" if small is not None else "none of those tried"))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
