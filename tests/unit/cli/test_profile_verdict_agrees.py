"""``pipecheck profile`` in-process on the committed captures: the record's ``verdict`` and
the headline on the screen give one answer, host-bound included (a capture without step
markers read whole, and a marked one), through the one display mapping
(``records.kinds.verdict_text``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.records.compare import CompareResult
from pipecheck.records.kinds import HOST_BOUND, VERDICTS, verdict_text
from pipecheck.records.profile import ProfileResult
from pipecheck.report.compare import verdict_line as compare_line
from pipecheck.report.profile import format_profile
from pipecheck.report.profile import verdict_line as profile_line

DATA = Path(__file__).parents[2] / "data"
CAPTURES = DATA / "captures"


@pytest.mark.parametrize("capture, verdict, steps_from", [
    # no step markers, no function that clearly repeats: read whole, host-bound
    ("small_fns_no_markers", "host-bound", "the whole capture"),
    # step markers, 50 tiny jitted calls a step: host-bound step by step
    ("host_bound", "host-bound", "markers"),
    # step markers, a slow generator: not host-bound
    ("input_bound", "input-bound", "markers"),
])
def test_the_record_and_the_headline_agree(capsys, tmp_path, capture, verdict, steps_from):
    out = tmp_path / "p.json"
    assert main(["profile", str(CAPTURES / f"{capture}.xplane.pb"), "--quiet",
                 "--json", str(out)]) == 0
    headline = capsys.readouterr().out.splitlines()[0]
    data = json.loads(out.read_text())
    assert data["format_version"] == store.FORMAT_VERSION == 6
    assert data["config"]["steps_from"] == steps_from
    assert data["verdict"] == verdict
    assert headline == f"pipecheck profile: {verdict_text(data['verdict'])}"
    # host_bound is written for scripts that read it, read off the verdict
    assert data["host_bound"] is (verdict == HOST_BOUND)
    if verdict == HOST_BOUND:
        assert headline == "pipecheck profile: host-bound (dispatch)"
        assert [f["kind"] for f in data["findings"]] == ["host-bound"]
    loaded = store.load(out, expect=ProfileResult)
    assert loaded.verdict == verdict and loaded.host_bound is (verdict == HOST_BOUND)
    assert format_profile(loaded).splitlines()[0] == headline


def test_every_verdict_has_one_display_used_by_every_headline():
    assert VERDICTS == ("compute-bound", "input-bound", "forced-sync", "host-bound",
                        "inconclusive")
    assert {v: verdict_text(v) for v in VERDICTS} == {
        "compute-bound": "compute-bound", "input-bound": "input-bound",
        "forced-sync": "forced-sync", "host-bound": "host-bound (dispatch)",
        "inconclusive": "inconclusive"}
    assert verdict_text("host work") == "host work"  # watch's own word, as it is
    profile = store.load(DATA / "records_v5" / "profile.json", ProfileResult)
    assert profile_line(profile) == "pipecheck profile: host-bound (dispatch)"
    compare = store.load(DATA / "records_v4" / "compare.json", CompareResult)
    for v in VERDICTS:
        line = compare_line(dataclasses.replace(compare, verdict=v))
        assert line == f"pipecheck compare: {verdict_text(v).upper()}"
