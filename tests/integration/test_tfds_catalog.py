"""`source: tfds:NAME` read end to end on a tfds catalog data set (imdb_reviews), with no
network and no TensorFlow: ``tfds.testing.mock_data`` generates examples with the data
set's real features (``text``, ``label``).

mock_data patches tfds in this process only, so the commands run in-process through
``pipecheck.cli.main(argv)``. Grain's spawned workers do receive the mocked records: the
mocked ArrayRecord source is tfds's ``PickableDataSourceMock``, which pickles its example
generator (examples are a function of the record index), so a worker reads the same records
as the main process (checked below).
"""

from __future__ import annotations

import json

import grain
import pytest
import tensorflow_datasets as tfds

from pipecheck.cli import main
from pipecheck.data.grain_pipeline import build_iter_dataset
from pipecheck.data.sources import open_records
from pipecheck.measure.pipeline import close_iterator
from pipecheck.records.grain_settings import GrainSettings

CATALOG = "imdb_reviews"
N_EXAMPLES = 24


@pytest.fixture
def mocked_catalog():
    with tfds.testing.mock_data(num_examples=N_EXAMPLES):
        yield


def text_of(record):
    return record["text"]


def test_mocked_catalog_records_reach_grain_workers(mocked_catalog):
    source = open_records(f"tfds:{CATALOG}", num_docs=0, seed=0, data_dir="", split="train")
    assert len(source) == N_EXAMPLES
    in_process = sorted(str(source[i]["text"]) for i in range(N_EXAMPLES))
    it = iter(build_iter_dataset(grain.MapDataset.source(source).map(text_of),
                                 GrainSettings(workers=2, threads=0)))
    try:
        from_workers = sorted(str(next(it)) for _ in range(N_EXAMPLES))
    finally:
        close_iterator(it)
    assert from_workers == in_process
    assert len(set(in_process)) > 1  # generated texts, not one placeholder


def test_dataloader_on_a_catalog_data_set(mocked_catalog, tmp_path, capsys):
    out = tmp_path / "dl.json"
    code = main(["dataloader", "--set", f"source=tfds:{CATALOG}", "--workers", "0,2",
                 "--batches", "6", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    data = json.loads(out.read_text())
    assert data["config"]["source"] == f"tfds:{CATALOG}"
    assert [r["settings"]["workers"] for r in data["results"]] == [0, 2]
    for r in data["results"]:
        assert r["examples_per_batch"] == 8 and r["tokens_per_s"] > 0
        assert any("IndexedSource" in s["name"] for s in r["stages"])  # read from the source
    assert f"source tfds:{CATALOG}" in captured.out


def test_compare_on_a_catalog_data_set(mocked_catalog, tmp_path, capsys):
    out = tmp_path / "c.json"
    code = main(["compare", "--set", f"source=tfds:{CATALOG}", "--workers", "0,1",
                 "--steps", "12", "--target-steps", "5", "--batches", "5", "--quiet",
                 "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    data = json.loads(out.read_text())
    assert data["config"]["source"] == f"tfds:{CATALOG}"
    assert sorted(s["settings"]["workers"] for s in data["loader"]) == [0, 1]
    assert data["verdict"] and data["estimates"]["real"]["value"] > 0


def test_without_the_data_set_the_error_is_one_line(tmp_path, capsys):
    # Outside mock_data the catalog set is not prepared anywhere: the one-line DataError.
    code = main(["dataloader", "--set", f"source=tfds:{CATALOG}", "--set",
                 f"data_dir={tmp_path}", "--batches", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1
    assert err[0].startswith(f"pipecheck: error: cannot open tfds data set '{CATALOG}'")
