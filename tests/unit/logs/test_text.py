"""Log files as real users have them: gzip-compressed, Windows line endings, lines the
reader cannot use (skipped and counted), broken files (one-line errors)."""

from __future__ import annotations

import gzip
import pathlib

import pytest

from pipecheck.errors import LogFormatError
from pipecheck.logs.maxtext import import_log
from pipecheck.logs.runs import load_run

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"
LINEN = REAL / "maxtext_v6e_linen.log"


def _same(a, b) -> None:
    assert [(s.step, s.time_s, s.line) for s in a.steps] == [
        (s.step, s.time_s, s.line) for s in b.steps]
    assert [(x.step, x.cause, x.evidence) for x in a.anomalies] == [
        (x.step, x.cause, x.evidence) for x in b.anomalies]


def test_a_gzip_log_is_read_directly_whatever_its_name(tmp_path):
    packed = tmp_path / "linen.log.gz"
    packed.write_bytes(gzip.compress(LINEN.read_bytes()))
    _same(import_log(packed), import_log(LINEN))
    renamed = tmp_path / "linen.txt"
    renamed.write_bytes(packed.read_bytes())
    assert load_run(renamed).step_time.summary.median == pytest.approx(0.2345)


def test_windows_line_endings_read_as_the_same_log(tmp_path):
    crlf = tmp_path / "linen_crlf.log"
    crlf.write_bytes(LINEN.read_bytes().replace(b"\n", b"\r\n"))
    _same(import_log(crlf), import_log(LINEN))


def test_a_corrupt_gzip_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "cut.log.gz"
    bad.write_bytes(gzip.compress(LINEN.read_bytes())[:300])
    with pytest.raises(LogFormatError, match="truncated or corrupt gzip") as e:
        import_log(bad)
    assert "\n" not in str(e.value)


def test_unreadable_step_lines_are_skipped_and_counted_never_fatal(tmp_path):
    text = LINEN.read_text()
    text = text.replace("completed step: 4, seconds: 0.235,", "completed step: 4, seconds: ?,")
    text += "completed step: 10, ...\ncompleted step: nonsense\n"
    p = tmp_path / "odd.log"
    p.write_text(text)
    run = import_log(p)
    assert [s.step for s in run.steps] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert run.unreadable_lines == 3
    assert any("3 step line(s) had no readable 'seconds:'" in w for w in run.warnings)


def test_metric_logger_variants_are_read(tmp_path):
    # MaxText's current metric_logger: a rampup phase line (no TFLOP/s), the elastic slice
    # count, extra losses, a hidden profiler boundary step, a NaN loss
    lines = [
        "[Rampup Batch Size Phase], completed step: 0, seconds: 20.000, total_weights: 10, "
        "loss: 10.000, lm_loss: 10.000, perplexity: 2.000",
        "completed step: 1, seconds: 1.000, live slice count: 2, TFLOP/s/device: 5.000, "
        "Tokens/s/device: 50.000, total_weights: 10, loss: 9.000, lm_loss: 9.000, "
        "perplexity: 2.000, moe_lb_loss: 0.010000",
        "completed profiler activation/deactivation step: 2, total_weights: 10, loss: 8.500, "
        "lm_loss: 8.500, perplexity: 2.000",
        "completed step: 3, seconds: 1.010, live slice count: 2, TFLOP/s/device: 5.000, "
        "Tokens/s/device: 50.000, total_weights: 10, loss: nan, lm_loss: nan, "
        "perplexity: nan, moe_lb_loss: 0.010000",
        "completed step: 4, seconds: 0.990, live slice count: 2, TFLOP/s/device: 5.000, "
        "Tokens/s/device: 50.000, total_weights: 10, loss: nan, lm_loss: nan, "
        "perplexity: nan, moe_lb_loss: 0.010000",
    ]
    p = tmp_path / "variants.log"
    p.write_text("\n".join(lines) + "\n")
    run = import_log(p)
    assert [s.step for s in run.steps] == [0, 1, 3, 4]
    assert run.steps[1].metrics["moe_lb_loss"] == 0.01
    assert run.steps[1].metrics["live slice count"] == 2
    assert run.steps[0].tflops_per_s_per_device is None
    assert run.unreadable_lines == 1
    assert [e.kind for e in run.events] == ["profiler_boundary"]
    assert run.nonfinite_loss_from == 3


def test_the_older_tflops_key_is_read_as_the_per_device_value(tmp_path):
    # MaxText before 2024 printed the per-device TFLOP/s as "TFLOP/s:"
    lines = [f"completed step: {n}, seconds: 0.281, TFLOP/s: 53.5{n % 10}, loss: 6.5"
             for n in range(30)]
    p = tmp_path / "old.log"
    p.write_text("\n".join(lines) + "\n")
    run = import_log(p)
    assert [s.tflops_per_s_per_device for s in run.steps][:3] == [53.50, 53.51, 53.52]
    assert "TFLOP/s" not in run.steps[0].metrics
