"""``compare --profile DIR`` captures its real-data run; ``pipecheck profile DIR`` on that
capture gives compare's verdict (the calibrated scenarios: compute-bound, input-bound, and a
forced sync on the training thread, named at the same line)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.busier_machine import rerun_if_busier

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

CALIBRATED = ["--config", str(REPO / "configs" / "calibrated.yml"), "--workers", "0",
              "--steps", "40", "--batches", "10"]
"""compare's own scenarios (tests/integration/test_compare.py), one worker setting."""


def pipecheck(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "pipecheck", *args], capture_output=True,
                       text=True, timeout=300, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


# Margins that hold on a busy host (two CPU hogs beside the machine's other jobs): loading
# sleeps, so only compute slows with the load (3x to 7x seen). Input-bound: 16x apart.
# Forced-sync: loading (45 ms) on the training thread, then the sync waits for compute; the
# load stretches compute and R together, and the step pairs the two whatever T was.
# Compute-bound: 8x apart; T's and R's samples half as many again or more for about the
# same time (40 ms steps, not 60), so a busy host's spread (60 ms stretched to 250 ms seen,
# or R's steps at 42 and 114 ms) narrows their intervals.
@pytest.mark.parametrize("name, sets", [
    ("compute-bound", ["compute_ms=40", "load_ms=5"]),
    ("input-bound", ["compute_ms=5", "load_ms=80"]),
    ("forced-sync", ["compute_ms=25", "load_ms=45", "host_sync=every_step"]),
])
def test_profile_verdict_agrees_with_compare(tmp_path: pathlib.Path, name: str,
                                             sets: list[str]) -> None:
    extra = [a for s in sets for a in ("--set", s)]
    if name == "forced-sync":
        extra += ["--threads", "0"]  # loading on the training thread, as the sync needs
    if name == "compute-bound":
        extra += ["--target-steps", "60", "--steps", "60"]

    def attempt(n: int) -> tuple[dict, str]:
        r = pipecheck(tmp_path, "compare", *CALIBRATED, *extra, "--quiet", "--json",
                      f"c{n}.json", "--profile", f"cap{n}")
        assert f"pipecheck profile cap{n}" in r.stdout  # the capture is announced
        return json.loads((tmp_path / f"c{n}.json").read_text()), f"cap{n}"

    comp, cap = rerun_if_busier(attempt)
    pipecheck(tmp_path, "profile", cap, "--json", "p.json", "--source", str(REPO / "pipecheck"))
    prof = json.loads((tmp_path / "p.json").read_text())
    assert comp["verdict"] == name, comp["verdict_reason"]
    assert prof["verdict"] == comp["verdict"], prof["reason"]
    if name == "forced-sync":
        (c,) = [f for f in comp["findings"] if f["kind"] == "forced-sync"]
        (p,) = [f for f in prof["findings"] if f["kind"] == "forced-sync"]
        assert p["location"].endswith(c["location"].split("pipecheck/", 1)[-1]), (p, c)
