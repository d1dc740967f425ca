"""Reading real jax.profiler captures: the committed CPU ones (tests/data/captures, made by
tests/data/make_profile_captures.py) and two real accelerator captures from public
repositories' test data (tests/data/captures/real, sources in its README)."""

import json
import pathlib
import sys
import types

import pytest

from pipecheck.analysis.profile import SyncCall
from pipecheck.errors import CaptureError
from pipecheck.logs import capture
from pipecheck.profiling import ProfileOptions, profile_capture

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
CAPTURES = DATA / "captures"
REAL = CAPTURES / "real"


@pytest.mark.parametrize("name, verdict, host_bound", [
    ("input_bound", "input-bound", False),
    ("forced_sync", "forced-sync", False),
    ("compute_bound", "compute-bound", False),
    ("host_bound", "host-bound", True),
])
def test_committed_capture_verdicts(name, verdict, host_bound):
    r = profile_capture(ProfileOptions(str(CAPTURES / f"{name}.xplane.pb"),
                                       source_dirs=(str(DATA),)))
    assert (r.verdict, r.host_bound) == (verdict, host_bound)
    assert r.config["steps_from"] == "markers" and r.config["device"] == "cpu"
    assert len(r.steps) >= 10 and len(r.device_busy_s) == len(r.steps)


def test_forced_sync_names_the_line():
    r = profile_capture(ProfileOptions(str(CAPTURES / "forced_sync.xplane.pb"),
                                       source_dirs=(str(DATA),)))
    (sync,) = [f for f in r.findings if f.kind == "forced-sync"]
    line = next(i for i, text in enumerate((DATA / "profile_loop.py").read_text().splitlines(), 1)
                if "# FORCED-SYNC" in text)
    assert sync.location == f"{DATA / 'profile_loop.py'}:{line}"
    assert "remove the forced sync" in r.recommendation


def test_input_bound_idle_is_input_wait():
    r = profile_capture(ProfileOptions(str(CAPTURES / "input_bound.xplane.pb")))
    idle = {row.category: row.share for row in r.device_time.rows}
    assert idle["idle: input wait"] > 0.5 > idle["device busy"]


def test_no_markers_with_step_fn():
    path = str(CAPTURES / "no_markers.xplane.pb")
    r = profile_capture(ProfileOptions(path, step_fn="train_step"))
    assert r.verdict == "input-bound" and r.config["steps_from"] == "jit_train_step on the device"
    assert r.picked_step is None and not r.whole_capture


def test_no_markers_picks_the_repeating_step_as_step_fn_would():
    # issue 32: the capture was refused ("no step markers ... --step-fn NAME"); train_step is
    # its only jitted function, run 12 times: read exactly as with --step-fn train_step
    path = str(CAPTURES / "no_markers.xplane.pb")
    named = profile_capture(ProfileOptions(path, step_fn="train_step"))
    picked = profile_capture(ProfileOptions(path))
    assert picked.picked_step is not None and not picked.whole_capture
    assert (picked.picked_step.function, picked.picked_step.executions) == ("train_step", 12)
    assert picked.picked_step.device_share == pytest.approx(1.0)
    assert picked.config == named.config and picked.verdict == named.verdict == "input-bound"
    assert [s.time_s for s in picked.steps] == [s.time_s for s in named.steps]


def test_folder_without_capture(tmp_path):
    with pytest.raises(CaptureError, match="holds no profiler capture"):
        capture.capture_files(tmp_path)


def test_truncated_capture(tmp_path):
    data = (CAPTURES / "input_bound.xplane.pb").read_bytes()
    bad = tmp_path / "vm.xplane.pb"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(CaptureError, match="cannot be read as a profiler capture"):
        capture.read_timeline(bad)


def test_newest_run_of_a_folder(tmp_path):
    for run in ("2026_01_01_00_00_00", "2026_02_01_00_00_00"):
        d = tmp_path / "plugins" / "profile" / run
        d.mkdir(parents=True)
        (d / "h.xplane.pb").write_bytes(b"")
    assert capture.capture_files(tmp_path)[0].parent.name == "2026_02_01_00_00_00"
    assert capture.capture_files(tmp_path, "2026_01_01_00_00_00")[0].parent.name == \
        "2026_01_01_00_00_00"
    with pytest.raises(CaptureError, match="no capture run named 'x'"):
        capture.capture_files(tmp_path, "x")


def test_sync_line_from_source(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("import numpy as np\n\n\ndef log(h, loss):\n    n = 3\n"
                   "    h.append(float(loss))\n    return n\n\n\ndef two(a, b):\n"
                   "    x = float(a)\n    return x + float(b)\n")
    assert capture.sync_line(src, 4, "__float__") == 6
    assert capture.sync_line(src, 10, "__float__") is None  # two calls: ambiguous
    location, code = capture.locate(SyncCall("train.py", 4, "log", "__float__", 1.0, 3),
                                    [tmp_path])
    assert location == f"{src}:6" and code == "h.append(float(loss))"
    location, code = capture.locate(SyncCall("train.py", 10, "two", "__float__", 1.0, 3),
                                    [tmp_path])
    assert location == f"{src}:10" and code == "two() (__float__)"


def test_real_tpu_capture():
    path = str(REAL / "tpu_v6e_host_offload.xplane.pb")
    r = profile_capture(ProfileOptions(path, step_fn="f"))
    assert r.config["device"] == "tpu" and r.config["steps_from"] == "jit_f on the device"
    assert len(r.steps) == 99
    assert r.env["device_kind"] == "TPU v6 Lite"
    assert any("no Python frames" in w for w in r.warnings)
    # no markers, no --step-fn: f (100 executions on the XLA Modules line, >99% of the
    # modules' device time; _psum, the next, under 1%) is picked, the same steps
    picked = profile_capture(ProfileOptions(path))
    assert picked.picked_step is not None and picked.picked_step.function == "f"
    assert picked.picked_step.executions == 100 and picked.picked_step.device_share > 0.99
    assert [s.time_s for s in picked.steps] == [s.time_s for s in r.steps]


def test_real_gpu_capture():
    path = str(REAL / "gpu_mi355_te_fused_attn.xplane.pb")
    r = profile_capture(ProfileOptions(path, step_fn="loss_fn"))
    assert r.config["device"] == "gpu" and r.env["device_kind"] == "AMD"
    assert len(r.steps) == 4
    busy = r.estimates.compute.value
    assert 0 < busy <= r.estimates.step.value
    # no per-module device time on this GPU capture: loss_fn, the thread's only jitted
    # function (5 calls), is picked by its share of the calls
    picked = profile_capture(ProfileOptions(path))
    assert picked.picked_step is not None
    assert (picked.picked_step.function, picked.picked_step.executions) == ("loss_fn", 5)
    assert picked.config["steps_from"] == r.config["steps_from"] == "PjitFunction(loss_fn)"
    assert picked.verdict == r.verdict == "compute-bound"


def test_no_device_activity():
    import numpy as np

    from pipecheck.analysis.profile import CaptureTimeline
    from pipecheck.profiling import analyze_host

    t = CaptureTimeline("h", "cpu", np.zeros((0, 2)), np.array([0.0]), np.array([1.0]),
                        np.array([0]), ("train",), np.array([0]), np.array([0.0]),
                        np.array([1.0]))
    with pytest.raises(CaptureError, match="no device activity"):
        analyze_host(t, ProfileOptions("x"), [])


XPROF_TABLES = json.dumps([
    {"cols": [], "rows": []},
    {"cols": [], "rows": [], "p": {
        "input_conclusion": "Your program is NOT input-bound because only 0.0% of the total "
                            "step time sampled is waiting for input.",
        "steptime_ms_average": "30.4", "host_compute_time_ms_avg": "30.4",
        "infeed_time_ms_avg": "0.0", "kernel_launch_time_ms_avg": "0.0"}},
])
"""The shape of XProf 2.24's input_pipeline_analyzer output (its second table's ``p``)."""


def test_xprof_view_reads_a_copy_and_parses_the_conclusion(monkeypatch, tmp_path):
    from pipecheck.logs import xprof_view

    seen = []

    def xspace_to_tool_data(paths, tool, params):
        seen.extend(paths)
        pathlib.Path(paths[0]).with_name("ALL_HOSTS.op_stats_v2.pb").write_bytes(b"cache")
        return XPROF_TABLES.encode(), True

    convert = types.ModuleType("xprof.convert")
    convert.raw_to_tool_data = types.SimpleNamespace(xspace_to_tool_data=xspace_to_tool_data)
    monkeypatch.setitem(sys.modules, "xprof", types.ModuleType("xprof"))
    monkeypatch.setitem(sys.modules, "xprof.convert", convert)
    pb = tmp_path / "h.xplane.pb"
    pb.write_bytes((CAPTURES / "input_bound.xplane.pb").read_bytes())
    summary = xprof_view.xprof_input_pipeline([pb])
    assert summary.conclusion.startswith("Your program is NOT input-bound")
    assert summary.step_s == pytest.approx(0.0304)
    assert summary.breakdown_s == {"host compute": pytest.approx(0.0304)}
    assert seen and pathlib.Path(seen[0]).parent != tmp_path  # XProf read a copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.xplane.pb"]  # no cache left here


def test_xprof_missing_is_one_line(monkeypatch):
    from pipecheck.logs import xprof_view

    monkeypatch.setitem(sys.modules, "xprof", None)
    monkeypatch.setitem(sys.modules, "xprof.convert", None)
    with pytest.raises(CaptureError, match=r"pip install 'pipecheck\[xprof\]'"):
        xprof_view.xprof_input_pipeline([CAPTURES / "input_bound.xplane.pb"])


def test_one_file_per_host_names_the_straggler(tmp_path):
    # two hosts' captures in one run folder: host0 waits 40 ms a step for data, host1 30 ms
    run = tmp_path / "plugins" / "profile" / "2026_11_23_00_00_00"
    run.mkdir(parents=True)
    (run / "host0.xplane.pb").write_bytes((CAPTURES / "input_bound.xplane.pb").read_bytes())
    (run / "host1.xplane.pb").write_bytes((CAPTURES / "compute_bound.xplane.pb").read_bytes())
    r = profile_capture(ProfileOptions(str(tmp_path)))
    assert [h.host for h in r.hosts] == ["host0", "host1"]
    assert [h.verdict for h in r.hosts] == ["input-bound", "compute-bound"]
    assert r.straggler is not None and r.straggler.hostname == "host0"
    assert r.straggler.metric == "data wait"


def test_xprof_refused_before_reading_when_missing(monkeypatch, capsys):
    import importlib.util

    from pipecheck.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xprof" else real(name, *a))
    assert main(["profile", str(CAPTURES / "input_bound.xplane.pb"), "--xprof"]) == 2
    err = capsys.readouterr().err
    assert err == "pipecheck: error: --xprof needs XProf's analyzers: pip install " \
                  "'pipecheck[xprof]'\n"


def test_trace_json_reads_as_the_xplane():
    # the same capture's two files: the trace JSON read with json/gzip, the .xplane.pb with
    # ProfileData, give the same steps, device time and verdict
    a = profile_capture(ProfileOptions(str(CAPTURES / "forced_sync.xplane.pb"),
                                       source_dirs=(str(DATA),)))
    b = profile_capture(ProfileOptions(str(CAPTURES / "forced_sync.trace.json.gz"),
                                       source_dirs=(str(DATA),)))
    assert b.env["host"] == "forced_sync" and b.verdict == a.verdict == "forced-sync"
    assert [s.step for s in b.steps] == [s.step for s in a.steps]
    assert b.step_time.samples_s == pytest.approx(a.step_time.samples_s, abs=1e-6)
    assert b.device_busy_s == pytest.approx(a.device_busy_s, abs=1e-6)
    assert [f.location for f in b.findings] == [f.location for f in a.findings]


def test_truncated_trace_json(tmp_path):
    data = (CAPTURES / "forced_sync.trace.json.gz").read_bytes()
    bad = tmp_path / "h.trace.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CaptureError, match="cannot be read as a profiler trace JSON"):
        capture.read_timeline(bad)


def test_capture_without_device_activity_is_one_line(tmp_path, capsys):
    import time

    import jax

    from pipecheck.cli import main

    jax.profiler.start_trace(str(tmp_path))
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            time.sleep(0.002)  # a loop that never runs anything on the device
    jax.profiler.stop_trace()
    assert main(["profile", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shows no device activity" in err


def test_profile_record_round_trips_and_diffs(tmp_path):
    from pipecheck.analysis.diff import diff_runs
    from pipecheck.logs.runs import load_run
    from pipecheck.records import store
    from pipecheck.records.profile import ProfileResult

    paths = []
    for name in ("input_bound", "forced_sync"):
        r = profile_capture(ProfileOptions(str(CAPTURES / f"{name}.xplane.pb")))
        paths.append(tmp_path / f"{name}.json")
        store.save(r, paths[-1])
        back = store.load(paths[-1], expect=ProfileResult)
        assert back.to_dict() == r.to_dict()
    d = diff_runs(load_run(paths[0]), load_run(paths[1]))
    assert d.a.kind == "profile" and d.b.kind == "profile"


def test_folder_with_only_trace_json(tmp_path):
    run = tmp_path / "plugins" / "profile" / "2026_11_23_00_00_00"
    run.mkdir(parents=True)
    (run / "h.trace.json.gz").write_bytes((CAPTURES / "forced_sync.trace.json.gz").read_bytes())
    assert capture.capture_files(tmp_path) == [run / "h.trace.json.gz"]
    assert profile_capture(ProfileOptions(str(tmp_path))).verdict == "forced-sync"


def test_profile_record_has_an_html_page():
    from pipecheck.report.page import render_page

    r = profile_capture(ProfileOptions(str(CAPTURES / "forced_sync.xplane.pb"),
                                       source_dirs=(str(DATA),)))
    page = render_page([("p.json", r)])
    assert "pipecheck profile: forced-sync" in page and "<svg" in page
    assert "recommendation: remove the forced sync" in page


def test_records_written_before_the_unmarked_readings_still_load(tmp_path):
    # a record of the format before picked_step and whole_capture were added (same version)
    from pipecheck.records import store

    r = profile_capture(ProfileOptions(str(CAPTURES / "input_bound.xplane.pb")))
    data = r.to_dict()
    assert data["picked_step"] is None and data["whole_capture"] is False
    del data["picked_step"], data["whole_capture"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = store.load(path)
    assert old.picked_step is None and not old.whole_capture and old.verdict == r.verdict


def test_whole_capture_record_round_trips():
    r = profile_capture(ProfileOptions(str(CAPTURES / "small_fns_no_markers.xplane.pb")))
    assert r.whole_capture and r.steps == () and r.estimates.step.n == 1
    assert type(r).from_dict(r.to_dict()) == r
