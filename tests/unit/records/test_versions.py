"""Record format 5 stores each fact once; format 6 gives a profile record one answer, its
``verdict`` (``host-bound`` included). Version 4 and 5 files are read (converted on loading)
to the same values; any other version is refused in one line.

The version-4 files in tests/data/records_v4 were written by pipecheck at format 4 from real
runs: ``pipecheck compare``/``dataloader``/``synthetic`` on the calibrated workload,
``examples/monitor_loop.py``, ``pipecheck import``/``diff`` of tests/data/maxtext_*.log and
``pipecheck profile`` of tests/data/captures/input_bound.xplane.pb. The version-5 files in
tests/data/records_v5 were written by pipecheck at format 5 (``pipecheck profile --json``,
from the repository's root): ``profile.json`` of
tests/data/captures/small_fns_no_markers.xplane.pb (no step markers, read whole) and
``profile_marked.json`` of tests/data/captures/host_bound.xplane.pb (step markers), both
host-bound: ``verdict`` ``inconclusive`` with ``host_bound`` true."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest

from pipecheck.errors import ResultFormatError
from pipecheck.records import store
from pipecheck.records.base import to_dict
from pipecheck.records.codec import decode_array
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.records.profile import ProfileResult
from pipecheck.records.versions import COMPARE_V4_COPIES, SETTING_V4_KNOBS
from pipecheck.report.profile import format_profile

from ...conftest import REPO

V4 = REPO / "tests" / "data" / "records_v4"
V5 = REPO / "tests" / "data" / "records_v5"
KINDS = ("synthetic", "dataloader", "compare", "monitor", "diff", "imported", "profile")


def _plain(value: Any) -> Any:
    """JSON as compared: an encoded array as its values (a Monitor's steps are compressed in
    pieces, so the same values may be other bytes), NaN as None."""
    if isinstance(value, dict) and set(value) == {"dtype", "zlib_base64"}:
        arr = decode_array(value, "array")
        return [None if isinstance(v, float) and math.isnan(v) else v for v in arr.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _json_of(value: Any) -> Any:
    """A value of a record as the writer puts it in JSON."""
    return to_dict(_Box(value))["value"]


@dataclasses.dataclass(frozen=True)
class _Box:
    value: Any


def _same(value: Any, old: Any, where: str) -> None:
    """``value`` (part of a record loaded from a version-4 file) holds every fact the file's
    ``old`` JSON held, under the same names: a key the file held is an attribute of the
    record (a field, or a property reading where the fact is now stored) or, for the
    statistics a file holds beside raw samples, a key the record writes."""
    if dataclasses.is_dataclass(value) and isinstance(old, dict):
        written = to_dict(value)
        for key, old_value in old.items():
            if key == "format_version":
                continue
            new = getattr(value, key) if hasattr(value, key) else written[key]
            _same(new, old_value, f"{where}.{key}")
    elif (isinstance(old, list) and isinstance(value, tuple) and value
          and dataclasses.is_dataclass(value[0]) and not getattr(value[0], "COLUMNAR", False)):
        assert len(value) == len(old), where
        for i, (v, o) in enumerate(zip(value, old, strict=True)):
            _same(v, o, f"{where}[{i}]")
    else:
        assert _plain(_json_of(value)) == _plain(old), where


@pytest.mark.parametrize("kind", KINDS)
def test_a_version_4_file_of_each_kind_loads_to_the_same_values(kind):
    path = V4 / f"{kind}.json"
    old = json.loads(path.read_text())
    assert old["format_version"] == 4 and old["kind"] == kind
    record = store.load(path)
    assert record.kind == kind and record.format_version == store.FORMAT_VERSION == 6
    _same(record, old, kind)


def test_a_version_4_compare_record_reads_its_copies_from_where_they_are_stored_once():
    old = json.loads((V4 / "compare.json").read_text())
    r = store.load(V4 / "compare.json", CompareResult)
    assert (r.target_step_s, r.loader_step_s, r.real_step_s) == (
        old["target_step_s"], old["loader_step_s"], old["real_step_s"])
    assert (r.chosen_workers, r.chosen_threads) == (old["chosen_workers"],
                                                   old["chosen_threads"])
    assert r.estimates.target.value == old["target_step_s"]
    assert r.tuning.chosen.workers == old["chosen_workers"]
    for setting, old_setting in zip(r.loader, old["loader"], strict=True):
        assert setting.settings.label() == (
            f"workers={old_setting['workers']}, buffer={old_setting['per_worker_buffer']}, "
            f"threads={old_setting['threads']}, prefetch={old_setting['prefetch']}")


@pytest.mark.parametrize("kind", KINDS)
def test_the_current_json_holds_no_fact_twice(kind):
    record = store.load(V4 / f"{kind}.json")
    data = json.loads(store.record_to_json(record))
    assert data["format_version"] == 6 and data["kind"] == kind
    assert list(data)[:2] == ["format_version", "kind"]  # written once, first
    again = store.load_dict(data)
    assert to_dict(again) == to_dict(record)
    if kind == "compare":
        assert not set(COMPARE_V4_COPIES) & set(data)
        assert data["estimates"]["target"]["value"] == record.target_step_s
        assert data["tuning"]["chosen"]["workers"] == record.chosen_workers
    if kind in ("compare", "dataloader"):
        settings = data["loader" if kind == "compare" else "results"]
        assert settings
        for s in settings:
            assert not set(SETTING_V4_KNOBS) & set(s)
            assert set(s["settings"]) == set(SETTING_V4_KNOBS)


def test_a_record_made_now_writes_no_copies():
    record = store.load(V4 / "dataloader.json", DataloaderResult)
    written = to_dict(record.results[0])
    assert "workers" not in written and written["settings"]["workers"] == record.results[0].workers
    # the kind is the class's, spelled once
    assert type(record).KIND == record.kind == "dataloader"
    assert "kind" not in {f.name for f in dataclasses.fields(record)}
    assert "format_version" not in {f.name for f in dataclasses.fields(record)}


@pytest.mark.parametrize("version", [1, 2, 3, 7, 99, "5", "6", True, None, 4.5])
def test_other_versions_are_refused_in_one_line(tmp_path, version):
    data = json.loads((V4 / "synthetic.json").read_text())
    data["format_version"] = version
    p = tmp_path / "old.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError) as e:
        store.load(p)
    assert str(e.value) == (
        f"{p} has format_version {version!r}; this pipecheck reads versions 4 to 6 (re-run "
        "the measurement with this version, or upgrade pipecheck)")


def test_a_version_4_setting_without_its_counts_is_refused(tmp_path):
    data = json.loads((V4 / "dataloader.json").read_text())
    del data["results"][0]["workers"]
    p = tmp_path / "d.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="version-4 loader setting without 'workers'"):
        store.load(p)


def test_a_version_5_file_with_a_version_4_key_is_refused(tmp_path):
    data = json.loads(store.record_to_json(store.load(V4 / "compare.json")))
    data["chosen_workers"] = 3  # a copy version 5 does not hold: not read, refused
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="unexpected field 'chosen_workers'"):
        store.load(p)


def test_version_4_files_read_for_diff_are_converted_too():
    from pipecheck.logs.runs import load_run

    for kind in ("synthetic", "compare", "monitor", "imported"):
        run = load_run(V4 / f"{kind}.json")
        assert run.kind == kind and len(run.steps) > 0
        assert np.isfinite(run.step_time.summary.median)


@pytest.mark.parametrize("name, steps_from", [("profile", "the whole capture"),
                                              ("profile_marked", "markers")])
def test_a_version_5_host_bound_profile_loads_as_host_bound(name, steps_from):
    old = json.loads((V5 / f"{name}.json").read_text())
    assert old["format_version"] == 5 and old["kind"] == "profile"
    assert (old["verdict"], old["host_bound"]) == ("inconclusive", True)
    record = store.load(V5 / f"{name}.json", ProfileResult)
    assert record.format_version == 6 and record.config["steps_from"] == steps_from
    assert (record.verdict, record.host_bound) == ("host-bound", True)
    # every other fact as the file held it
    _same(record, {k: v for k, v in old.items() if k != "verdict"}, name)
    assert format_profile(record).splitlines()[0] == "pipecheck profile: host-bound (dispatch)"
    data = json.loads(store.record_to_json(record))
    assert (data["format_version"], data["verdict"], data["host_bound"]) == (6, "host-bound", True)
    assert to_dict(store.load_dict(data)) == to_dict(record)


def test_a_version_5_profile_not_host_bound_keeps_its_verdict(tmp_path):
    data = json.loads(store.record_to_json(store.load(V4 / "profile.json")))
    data["format_version"] = 5
    assert (data["verdict"], data["host_bound"]) == ("input-bound", False)
    p = tmp_path / "v5.json"
    p.write_text(json.dumps(data))
    record = store.load(p, ProfileResult)
    assert (record.verdict, record.host_bound) == ("input-bound", False)


def test_a_version_5_multi_host_profile_names_its_own_host_host_bound(tmp_path):
    data = json.loads((V5 / "profile.json").read_text())
    own = data["env"]["host"]
    row = {"steps": 0, "step_s": 0.06, "device_busy_s": 0.005, "input_idle_s": 0.01}
    data["hosts"] = [{"host": own, **row, "verdict": "inconclusive"},
                     {"host": "other", **row, "verdict": "inconclusive"},
                     {"host": "third", **row, "verdict": "compute-bound"}]
    p = tmp_path / "hosts.json"
    p.write_text(json.dumps(data))
    record = store.load(p, ProfileResult)
    assert record.verdict == "host-bound"
    # only the record's own host is known host-bound; the others kept no flag in version 5
    assert [h.verdict for h in record.hosts] == ["host-bound", "inconclusive", "compute-bound"]
    table = format_profile(record)
    assert "host-bound (dispatch)" in next(line for line in table.splitlines()
                                           if line.startswith(own))


def test_a_version_6_files_host_bound_is_read_off_its_verdict(tmp_path):
    # the verdict is the one answer: a host_bound a file holds is written for readers, not read
    data = json.loads(store.record_to_json(store.load(V4 / "profile.json")))
    assert data["format_version"] == 6 and data["verdict"] == "input-bound"
    data["host_bound"] = True
    p = tmp_path / "v6.json"
    p.write_text(json.dumps(data))
    record = store.load(p, ProfileResult)
    assert (record.verdict, record.host_bound) == ("input-bound", False)
