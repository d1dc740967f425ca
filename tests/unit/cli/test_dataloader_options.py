"""Option parsing of ``pipecheck dataloader`` (fails before any measurement)."""

from __future__ import annotations

import pytest

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


def test_a_knob_the_pipeline_fixes_is_refused_naming_where_it_was_asked(tmp_path, capsys,
                                                                         monkeypatch):
    """An option or a config key asking for workers the pipeline's own mp_prefetch would not
    run: one line, exit 2, nothing measured (the pipeline is real Grain; no worker starts)."""
    import grain

    from pipecheck.measure import dataloader

    own = (grain.MapDataset.range(64).to_iter_dataset(grain.ReadOptions(num_threads=2))
           .batch(4).mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))
    monkeypatch.setattr(dataloader, "loader_parts",
                        lambda config: dataloader.LoaderParts(own, lambda b: b, None))
    monkeypatch.setattr(dataloader, "measure_setting", lambda *a, **k: pytest.fail("measured"))
    cfg = tmp_path / "tuned.yml"
    cfg.write_text("num_workers: 3\n")
    assert main(["dataloader", "--config", str(cfg)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "pipecheck: error: the config's num_workers 3 cannot change this pipeline's worker "
        "processes: it calls mp_prefetch(grain.MultiprocessingOptions(num_workers=2, "
        "per_worker_buffer_size=1)) itself; drop the config's num_workers, or remove "
        "mp_prefetch from the pipeline to let pipecheck set the workers"]
    assert main(["dataloader", "--per-worker-buffer-size", "2"]) == 2
    assert capsys.readouterr().err.startswith(
        "pipecheck: error: --per-worker-buffer-size 2 cannot change this pipeline's per-worker "
        "buffer")
