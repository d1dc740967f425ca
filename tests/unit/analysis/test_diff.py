"""pipecheck diff: normalizing runs, significance, warnings, errors, the CLI in-process."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from pipecheck.analysis import diff
from pipecheck.cli import main
from pipecheck.errors import ResultFormatError
from pipecheck.logs import maxtext
from pipecheck.logs.runs import load_run
from pipecheck.records import store
from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable
from pipecheck.report.diff import diff_table, format_diff

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
LOG_A, LOG_B = DATA / "maxtext_a.log", DATA / "maxtext_b.log"

ENV = {"jax": "0.10.2", "jaxlib": "0.10.2", "backend": "cpu", "device_kind": "cpu",
       "device_count": 1, "host": "vm", "cpu_count": 2}


def run_dict(step_s: float, seed: int, n: int = 30, kind: str = "synthetic",
             env: dict | None = None, config: dict | None = None, tags: dict | None = None):
    """A pipecheck run as its JSON object: step 0 compiles, the rest ~step_s with noise."""
    rng = np.random.default_rng(seed)
    times = [0.2] + list(step_s * (1 + 0.05 * rng.standard_normal(n - 1)))
    tags = tags or {}
    steps = [{"step": i, "time_s": float(t), "tags": tags.get(i, ["compile"] if i == 0 else []),
              "spans": {"sync": float(t)}, "loss": 1.0 / (i + 1)} for i, t in enumerate(times)]
    return {
        "kind": kind, "format_version": store.FORMAT_VERSION,
        "env": env or ENV, "config": config or {"workload": "calibrated", "compute_ms": 40.0},
        "steps": steps,
        "throughput": {"examples_per_s": 1.0, "tokens_per_s": None, "flops_per_step": 4e9,
                       "peak_memory_bytes": 557124},
        "compile": {"first_step_s": 0.2, "compile_s": 0.15, "train_step_compiles": 1},
        "warnings": [],
    }


def written(data):
    """A run from ``run_dict`` as pipecheck writes it: its steps by column."""
    rows = [StepRecord(d["step"], d["time_s"], tuple(d["tags"]), d["spans"], d["loss"])
            for d in data["steps"]]
    return {**data, "steps": StepTable.from_rows(StepRecord, rows).to_json()}


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_text(json.dumps(written(data)))
    return p


def test_two_logs_with_a_tiny_difference_are_not_significant():
    result = diff.diff_runs(load_run(LOG_A), load_run(LOG_B))
    row = result.row("step time median")
    assert (row.a, row.b) == (0.238, 0.239)
    assert row.significance == "not significant"
    assert row.ci_low is not None and row.ci_high is not None and row.ci_low <= 0 <= row.ci_high
    assert result.verdict.startswith("step time: not significant.")
    assert "treat A and B as equally fast" in result.verdict
    text = format_diff(result)
    assert "not significant" in text
    assert "significant (" not in text.replace("not significant (", "")
    assert result.warnings == ("A: 1 step(s) far from the steady state without a known cause: 55",)


def test_log_rows(tmp_path):
    result = diff.diff_runs(load_run(LOG_A), load_run(LOG_B))
    assert result.row("parameters").a == pytest.approx(0.552e9)
    assert result.row("final loss").a == pytest.approx(7.923)
    assert result.row("final loss").b == pytest.approx(7.921)
    assert result.row("TFLOP/s per device").a == 88.582
    assert result.row("first step (compile)").b == 42.118
    assert result.row("anomalous steps").a == 6 and result.row("anomalous steps").b == 4
    assert result.row("memory (compiled step)").a == pytest.approx(1.8e9)
    assert result.row("memory in use (device)").a == pytest.approx(0.61 * 2**30)
    assert result.row("step time mean, all steps").a > 4 * result.row("step time median").a
    assert [(v.name, v.a, v.b) for v in result.versions] == [
        ("jax", "0.8.1", "0.8.1"), ("jaxlib", "0.8.1", "0.8.1"),
        ("backend", "PJRT C API", "PJRT C API")]


def test_slower_run_is_significant_with_the_right_sign(tmp_path):
    a = diff.summary_from_record(written(run_dict(0.040, seed=1)), "a.json")
    b = diff.summary_from_record(written(
        run_dict(0.060, seed=2, config={"workload": "calibrated", "compute_ms": 60.0})), "b.json")
    result = diff.diff_runs(a, b)
    row = result.row("step time median")
    assert row.significance == "significant"
    assert row.diff is not None and row.diff > 0 and row.ci_low is not None and row.ci_low > 0
    assert row.relative == pytest.approx(row.diff / row.a)
    assert result.verdict.startswith("step time: B takes ")
    assert "longer per step than A: significant" in result.verdict
    tflops = result.row("TFLOP/s per device")
    assert tflops.significance == "significant" and tflops.diff < 0
    assert "warning: the configs differ: compute_ms: 40.0 vs 60.0" in format_diff(result)
    # and the other way round
    back = diff.diff_runs(b, a).row("step time median")
    assert back.significance == "significant" and back.diff < 0


def test_pipecheck_run_steady_state_and_anomalies():
    data = run_dict(0.040, seed=3, tags={7: ["checkpoint"], 9: ["eval"]})
    # the checkpoint of step 7 took 0.3 s; step 9's eval was quick; step 20 stalled in
    # host code outside any span
    data["steps"][7].update(time_s=0.34, spans={"sync": 0.04, "checkpoint": 0.3})
    data["steps"][20].update(time_s=0.5, spans={"sync": 0.04, "other": 0.46})
    s = diff.summary_from_record(written(data), "a.json")
    assert s.step_time.summary.n == 26
    steady_times = [st["time_s"] for st in data["steps"] if st["step"] not in (0, 7, 9, 20)]
    assert list(s.step_time.samples_s) == steady_times
    # listed: the steps far above the steady state (a quick tagged step is apart, not slow)
    assert [(an.step, an.cause) for an in s.anomalies] == [
        (0, "compilation"), (7, "checkpoint"), (20, "host work outside spans")]
    assert s.anomalies[2].ratio == pytest.approx(0.5 / np.median(steady_times))
    assert s.anomalies[2].evidence.startswith("host work outside spans 460.0 ms of the step's")
    # a record that holds its anomalies is read as written (they name compiled functions)
    stored = dict(data, anomalies=[{"step": 20, "time_s": 0.5, "ratio": 12.0,
                                    "cause": "compilation", "evidence": "jit(f) 0.4 s"}])
    assert [a.cause for a in diff.summary_from_record(written(stored), "a.json").anomalies] == [
        "compilation"]
    assert s.first_step_s == 0.2 and s.final_loss == pytest.approx(1 / 30)
    assert s.tflops_per_s_per_device == tuple(4e9 / t / 1e12 for t in steady_times)
    assert s.memory_compiled_bytes == 557124


def test_kinds_this_branch_does_not_define_still_diff():
    # a "monitor" record: only the common ground (steps, env, config) is read
    data = run_dict(0.040, seed=4, kind="monitor")
    data["something_new"] = {"x": 1}
    s = diff.summary_from_record(written(data), "m.json")
    assert s.kind == "monitor" and s.step_time.summary.n == 29


def test_environment_differences_warn():
    env_b = dict(ENV, jax="0.9.0", host="other")
    a = diff.summary_from_record(written(run_dict(0.040, seed=1)), "a.json")
    b = diff.summary_from_record(written(run_dict(0.040, seed=2, env=env_b)), "b.json")
    warnings = diff.diff_runs(a, b).warnings
    assert warnings == ("the environments differ: jax: 0.10.2 vs 0.9.0; host: vm vs other",)


def test_log_against_pipecheck_run_warns_about_differences(tmp_path):
    a = load_run(LOG_A)
    b = diff.summary_from_record(written(run_dict(0.040, seed=1)), "b.json")
    warnings = diff.diff_runs(a, b).warnings
    assert warnings[0].startswith("A is a MaxText log and B a pipecheck synthetic run")
    assert warnings[1] == ("the environments differ: jax: 0.8.1 vs 0.10.2; "
                           "jaxlib: 0.8.1 vs 0.10.2; backend: PJRT C API vs cpu")


def test_imported_json_and_the_log_give_the_same_summary(tmp_path):
    out = tmp_path / "a.json"
    store.save(maxtext.import_log(LOG_A), out)
    from_json, from_log = load_run(out), load_run(LOG_A)
    assert from_json.step_time == from_log.step_time
    assert from_json.anomalies == from_log.anomalies
    assert from_json.tokens_per_s_per_device == from_log.tokens_per_s_per_device


@pytest.mark.parametrize("content, message", [
    ('{"a": 1}', r"is not a pipecheck result \(no kind/format_version\)"),
    ('{"kind": "synthetic", "format_version": 99, "steps": []}', "has format_version 99"),
    ('{"kind": "dataloader", "format_version": 4}',
     "holds a 'dataloader' result without per-step times"),
    ('{"kind": "synthetic", ', "starts like JSON but is not valid JSON"),
    ("", "is neither a pipecheck result"),
    ("just some text\n", "is neither a pipecheck result"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, content, message):
    p = tmp_path / "x.json"
    p.write_text(content)
    with pytest.raises(ResultFormatError, match=message):
        load_run(p)


def test_diff_record_round_trips(tmp_path):
    result = diff.diff_runs(load_run(LOG_A), load_run(LOG_B))
    out = tmp_path / "d.json"
    store.save(result, out)
    assert store.load(out, expect=diff.DiffResult) == result
    data = json.loads(out.read_text())
    assert data["kind"] == "diff"
    assert {"a", "b", "rows", "versions", "verdict", "warnings", "confidence"} <= set(data)
    assert data["rows"][4]["name"] == "step time median"


def test_diff_table_exact():
    rows = [
        diff.DiffRow("step time median", "s", 0.0519, 0.0802, 0.0283, 0.5453, "significant",
                     0.0000123, 0.0155, 0.0328),
        diff.DiffRow("final loss", "loss", 7.973, 7.971, -0.002, -0.00025),
        diff.DiffRow("memory (compiled step)", "bytes", 557124.0, None),
        diff.DiffRow("first step (compile)", "s", 41.73, 0.202, -41.528, -0.99516),
    ]
    assert diff_table(rows) == "\n".join([
        "                        A          B         B-A       change    significance",
        "----------------------  ---------  --------  --------  --------  ---------------------",
        "step time median        51.9 ms    80.2 ms   +28.3 ms  +54.5%    significant (p<0.001)",
        "final loss              7.973      7.971     -0.002    -0.0%",
        "memory (compiled step)  544.1 KiB  -         -         -",
        "first step (compile)    41.73 s    202.0 ms  -41.53 s  -99.5%",
    ])


# --- the CLI, in-process ---------------------------------------------------------------


def test_cli_diff_writes_json(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["diff", str(LOG_A), str(LOG_B), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "step time: not significant." in text and f"wrote {out}" in text
    assert store.load(out).kind == "diff"


def test_cli_import_writes_json(tmp_path, capsys):
    out = tmp_path / "i.json"
    assert main(["import", str(LOG_A), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pipecheck import:" in text and "attribution shift" in text
    assert store.load(out, expect=maxtext.ImportedRun).step_time.summary.median == 0.238


@pytest.mark.parametrize("command", ["diff", "import"])
def test_cli_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, command):
    bad = tmp_path / "bad.log"
    bad.write_text("I0312 09:14:27.118203 1 train.py:196] number parameters: 1 billion\n")
    out = tmp_path / "out.json"
    args = [command, str(bad), str(LOG_B)] if command == "diff" else [command, str(bad)]
    assert main(args + ["--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pipecheck: error: ")
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


def test_cli_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "d.json"
    out.write_text("keep")
    assert main(["diff", str(LOG_A), str(LOG_B), "--json", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert out.read_text() == "keep"
    assert main(["diff", str(LOG_A), str(LOG_B), "--json", str(out), "--force"]) == 0


def test_cli_missing_file(tmp_path, capsys):
    assert main(["diff", str(LOG_A), str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def _written_from_ahead(record, arrays, encoder, compressed_now) -> str:
    """``record`` written as JSON once each of ``arrays`` (all large) was compressed ahead
    by ``encoder``: checked to take each one's text, none compressed again
    (``compressed_now``: the sizes ``encoder`` compressed since), none left behind."""
    from pipecheck.encoding import PARALLEL_MIN_BYTES
    from pipecheck.records.base import to_dict

    assert all(x.nbytes >= PARALLEL_MIN_BYTES for x in arrays)
    assert all(encoder.is_ahead(x) for x in arrays)
    encoder.wait_ahead()
    compressed_now.clear()
    text = json.dumps(to_dict(record, encoder))
    assert not [n for n in compressed_now if n >= PARALLEL_MIN_BYTES]
    assert not any(encoder.is_ahead(x) for x in arrays)  # each taken once
    return text


def _counting_encoder(compressed: list[int]):
    """A ParallelEncoder that notes the size of every array it compresses."""
    from pipecheck.encoding import ParallelEncoder
    from pipecheck.records.codec import zlib_base64

    return ParallelEncoder(compress=lambda data: compressed.append(data.nbytes)
                           or zlib_base64(data))


def test_a_diff_to_save_has_its_columns_compressed_ahead_and_writes_the_same_record(
        tmp_path):
    """``diff --json``: the runs' step columns and per-step rates are compressed while the
    runs are compared; the record is the same as one encoded when written, and writing
    it compresses none of them again."""
    from pipecheck.records.base import to_dict
    from tests.maxtext_log import write_log_pair

    la, lb = write_log_pair(tmp_path, 140_000)  # 1.1 MB a column: past PARALLEL_MIN_BYTES
    a, b = load_run(la), load_run(lb)
    arrays = [*a.per_step_arrays(), *b.per_step_arrays()]
    assert len(arrays) >= 8
    expected = json.dumps(to_dict(diff.diff_runs(a, b)))
    compressed: list[int] = []
    encoder = _counting_encoder(compressed)
    result = diff.diff_runs(a, b, encoder=encoder)
    assert _written_from_ahead(result, arrays, encoder, compressed) == expected


def test_an_import_to_save_has_its_columns_compressed_ahead_and_writes_the_same_record(
        tmp_path):
    """``import --json``: the steps' columns are compressed while they are analysed, the
    steady step times while the run is reported; writing compresses none of them again."""
    from pipecheck.records.base import to_dict
    from tests.maxtext_log import write_log

    log = tmp_path / "a.log"
    write_log(log, 140_000)  # 1.1 MB a column: past PARALLEL_MIN_BYTES
    expected = json.dumps(to_dict(maxtext.import_log(log)))
    compressed: list[int] = []
    encoder = _counting_encoder(compressed)
    run = maxtext.import_log(log, encoder=encoder)
    arrays = [*run.steps.per_step_arrays(), np.asarray(run.step_time.samples_s)]
    assert _written_from_ahead(run, arrays, encoder, compressed) == expected


@pytest.mark.parametrize(("change", "min_change", "outcome"), [
    (0.03, diff.MIN_CHANGE, "not significant"),   # the steps' test finds it; under 4%
    (0.03, 0.0, "significant"),
    (0.10, diff.MIN_CHANGE, "significant"),
])
def test_a_change_under_min_change_is_not_significant_though_the_steps_test_finds_it(
        change, min_change, outcome):
    """300 steps with 5% noise each: the steps' test resolves a 3% change (p < 0.001), yet
    two runs of one workload differ that much without one."""
    a = diff.summary_from_record(written(run_dict(0.04, 0, n=300)), "A")
    b = diff.summary_from_record(written(run_dict(0.04 * (1 + change), 1, n=300)), "B")
    result = diff.diff_runs(a, b, min_change=min_change)
    assert result.outcome == outcome and result.min_change == min_change
    assert result.row("step time median").significance == outcome
    if outcome == "not significant":
        assert f"under the {min_change:.0%} diff judges (--min-change)" in result.verdict
        assert "the steps' own test finds it" in result.verdict
    again = type(result).from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.min_change == min_change


def test_cli_min_change_is_a_percent_and_bad_values_are_one_line(tmp_path, capsys):
    a = write(tmp_path, "a.json", run_dict(0.04, 0, n=300))
    b = write(tmp_path, "b.json", run_dict(0.04 * 1.03, 1, n=300))
    assert main(["diff", str(a), str(b), "--min-change", "1", "--quiet"]) == 0
    assert "significant (steady-state median" in capsys.readouterr().out
    assert main(["diff", str(a), str(b), "--quiet"]) == 0
    assert "under the 4% diff judges" in capsys.readouterr().out
    assert main(["diff", str(a), str(b), "--min-change", "-1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--min-change" in err and len(err.strip().splitlines()) == 1
