"""Option parsing of ``pipecheck dataloader`` (fails before any measurement)."""

from __future__ import annotations

from pipecheck.cli import main


def test_bad_worker_list_is_a_usage_error(capsys):
    assert main(["dataloader", "--workers", "1,two"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "expected a number or a comma-separated list like 0,1,2,4" in err[0]


def test_negative_threads_is_a_usage_error(capsys):
    assert main(["dataloader", "--threads", "-1"]) == 2
    assert "--threads" in capsys.readouterr().err


def test_batches_must_be_positive(capsys):
    assert main(["dataloader", "--batches", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pipecheck: error: Invalid value for '--batches': 0 is not in the range "
                   "x>=1. (see 'pipecheck dataloader --help')"]


def test_existing_json_without_force_is_refused_before_measuring(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("{}")
    assert main(["dataloader", "--json", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "{}"
