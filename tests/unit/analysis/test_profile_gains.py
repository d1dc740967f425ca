"""What a capture shows each change would buy, on the repository's real jax.profiler
captures: the headspace is the device's idle time per step, the forced sync ranks first
with its low end 0 on the CPU backend (the host's cores are the device), a compute-bound
capture's fixes stay within its idle time, a capture read whole has no gains and says why."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipecheck.analysis.profile_gains import profile_gains
from pipecheck.profiling import ProfileOptions, profile_capture
from pipecheck.records import store
from pipecheck.records.profile import ProfileResult

CAPTURES = "tests/data/captures"


@pytest.fixture(scope="module")
def records() -> dict[str, ProfileResult]:
    return {name: profile_capture(ProfileOptions(f"{CAPTURES}/{name}.xplane.pb",
                                                 source_dirs=("tests/data",)))
            for name in ("forced_sync", "compute_bound", "input_bound", "small_fns_no_markers")}


def test_the_forced_sync_ranks_first_and_its_range_starts_at_0_on_shared_cores(records):
    r = records["forced_sync"]
    assert r.headspace_s is not None and r.gains == profile_gains(r).gains
    top = r.gains[0]
    assert top.kind == "sync" and "profile_loop.py:103" in top.change
    assert top.gain_s.low == 0.0 and "host and device share the cores" in top.why
    assert top.gain_s.high <= r.headspace_s.high + 1e-12
    assert [g.kind for g in r.gains] == ["sync", "loader-setting"]


def test_off_the_cpu_the_sync_s_low_end_is_what_the_intervals_leave(records):
    r = records["forced_sync"]
    gpu = dataclasses.replace(r, config={**r.config, "device": "gpu"})
    (sync,) = [g for g in profile_gains(gpu).gains if g.kind == "sync"]
    assert 0.0 < sync.gain_s.low <= sync.gain_s.high
    assert "the capture shows the device busy beside the host" in sync.why


def test_a_compute_bound_capture_buys_no_more_than_its_idle_time(records):
    r = records["compute_bound"]
    assert r.headspace_s is not None
    assert all(g.gain_s.high <= r.headspace_s.high + 1e-12 for g in r.gains)
    assert r.headspace_s.high < 0.1 * r.estimates.step.value
    assert any("within 10% of T" in n for n in r.gains_notes)


def test_an_input_bound_capture_names_the_loader(records):
    (g,) = records["input_bound"].gains
    assert g.kind == "loader-setting" and g.gain_s.low == 0.0 and g.gain_s.high > 0


def test_a_capture_read_whole_has_no_gains_and_says_why(records):
    r = records["small_fns_no_markers"]
    assert r.whole_capture and (r.headspace_s, r.gains) == (None, ())
    assert r.gains_notes[0].startswith("no gains: the capture was read as one window")


def test_the_new_fields_round_trip_and_an_older_file_reads_without_them(records):
    r = records["forced_sync"]
    data = json.loads(store.record_to_json(r))
    assert ProfileResult.from_dict(data) == r
    for key in ("headspace_s", "gains", "gains_notes"):
        del data[key]
    old = ProfileResult.from_dict(data)
    assert (old.headspace_s, old.gains, old.gains_notes) == (None, (), ())
