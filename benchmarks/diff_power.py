"""How often the default ``pipecheck diff`` calls identical runs different (A/A), and the
smallest step-time change it detects, on real runs.

Every run is a fresh ``pipecheck synthetic --set workload=calibrated`` process at the
default steps (its own start-up, calibration and compile), so a pair carries everything
that differs between two real runs of one workload: calibration, compile, and the machine's
load at the time. (a) A/A: pairs at the same ``compute_ms``; a false verdict is an outcome
``significant``. (b) Power: B at ``compute_ms * (1 + change)``; detected is ``significant``
with B slower. The smallest change detected in at least ``POWER`` of pairs is printed.
Resampling recorded step times would miss the run-to-run part (calibration, compile), the
part a user's two runs differ by; so real runs are used, side by side in one process.

    python benchmarks/diff_power.py [--pairs 15] [--power-pairs 8] [--changes 0.03,0.05,0.1]
        [--aa-workload calibrated|demo]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from pipecheck.analysis.diff import diff_runs, summary_from_record

BASE_MS = 20.0
POWER = 0.8
"""Detected in at least 80% of pairs: the usual power a test is sized for."""


def run(compute_ms: float | None, out: pathlib.Path) -> dict:
    """One fresh run: the calibrated workload at ``compute_ms``, or the demo for None."""
    sets = (["workload=calibrated", f"compute_ms={compute_ms}"] if compute_ms is not None
            else ["workload=demo"])
    cmd = [sys.executable, "-m", "pipecheck", "synthetic", "--json", str(out), "--quiet",
           "--force", *(x for kv in sets for x in ("--set", kv))]
    subprocess.run(cmd, check=True, capture_output=True, env=os.environ)
    return json.loads(out.read_text())


def outcome(a_ms: float | None, b_ms: float | None, d: pathlib.Path) -> tuple[str, float]:
    a = summary_from_record(run(a_ms, d / "a.json"), "A")
    b = summary_from_record(run(b_ms, d / "b.json"), "B")
    result = diff_runs(a, b)
    return result.outcome, result.row("step time median").relative or 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--power-pairs", type=int, default=8)
    p.add_argument("--changes", default="0.03,0.05,0.1")
    p.add_argument("--aa-workload", choices=("calibrated", "demo"), default="calibrated",
                   help="the A/A pairs' workload (demo: fixed compute, no calibration)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        base = BASE_MS if args.aa_workload == "calibrated" else None
        aa = [outcome(base, base, d) for _ in range(args.pairs)]
        false = sum(o == "significant" for o, _ in aa)
        inconclusive = sum(o == "inconclusive" for o, _ in aa)
        print(f"A/A ({args.aa_workload}): {false}/{len(aa)} pairs significant (false verdicts: "
              f"{false / len(aa):.0%}); inconclusive {inconclusive}; |change| median "
              f"{sorted(abs(r) for _, r in aa)[len(aa) // 2]:.1%}")
        smallest = None
        for change in (float(c) for c in args.changes.split(",") if c):
            got = [outcome(BASE_MS, BASE_MS * (1 + change), d) for _ in range(args.power_pairs)]
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
