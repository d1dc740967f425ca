"""A pipeline that sets its own read prefetch, as MaxText's does: the prefetch buffers
*elements* (documents, before packing and batching), not batches, so compare's real-data run
keeps its steady state (issue 32, item 6). The workload is a user's file outside the
repository and off ``sys.path``, run through the CLI in a fresh process."""

from __future__ import annotations

import json
import pathlib

import pytest

from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable

from ..conftest import run_cli

MAXTEXT_SHAPED = (pathlib.Path(__file__).resolve().parents[1] / "data" / "users"
                  / "maxtext_shaped.py")
"""The user's model and pipeline file (its read prefetch from ``params.prefetch``)."""


def project(tmp_path: pathlib.Path, *, prefetch: int) -> pathlib.Path:
    """The user's model file in its own directory, and a config naming it by path."""
    d = tmp_path / "lm"
    d.mkdir()
    model = d / "maxtext_shaped.py"
    model.write_text(MAXTEXT_SHAPED.read_text())
    cfg = tmp_path / "lm.yml"
    cfg.write_text("workload:\n"
                   + "".join(f"  {r}: {model}:{r}\n" for r in ("init", "train_step", "dataset"))
                   + "batch_size: 16\n"
                   + f"params: {{corpus: {d / 'corpus.array_record'}, prefetch: {prefetch}}}\n")
    return cfg


@pytest.mark.parametrize("steps", [20, 6])
def test_read_prefetch_of_documents_leaves_a_steady_state(tmp_path, steps):
    """64 documents buffered ahead of packing and batches of 16 are at most 4 batches, not
    64: the 20-step run keeps 15 steady steps (it kept none). Asked for 6 steps, the run
    would keep none between its warm-up of 5 and its last step (which drains): it is sized
    up front to keep 5, and says so."""
    out = tmp_path / "c.json"
    proc = run_cli("compare", "--config", str(project(tmp_path, prefetch=64)),
                   "--workers", "0", "--steps", str(steps), "--target-steps", "10",
                   "--batches", "10", "--quiet", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    [measured] = data["loader"]
    assert (measured["settings"]["threads"], measured["settings"]["prefetch"]) == (4, 64)
    # D: 4x the 4 batches buffered at start-up are timed (256 when they counted as 64)
    assert measured["batch_time"]["n"] == 16
    tags = step_tags(data)
    warmup = [i for i, t in enumerate(tags) if "warmup" in t]
    assert warmup == [1, 2, 3, 4]  # 64 elements, >= 16 per batch: 4 batches buffered
    assert data["real"]["n"] > 0, data["verdict_reason"]
    assert data["estimates"]["real"]["value"] > 0
    assert "too few real-data step time samples" not in data["verdict_reason"]
    sized_up = [w for w in data["warnings"] if "warm-up" in w]
    if steps == 20:
        assert len(tags) == 20 and not sized_up
    else:
        assert len(tags) == 11  # 5 warm-up (step 0 and 4 buffered), 5 steady, the drain
        assert sized_up == ["the pipeline holds up to 4 batches ready at start-up (a read "
                            "prefetch buffer of 64 elements, at least 16 per batch: 4 "
                            "batches): their steps are warm-up, so the real-data run took 11 "
                            "steps instead of the 6 asked for (--steps), 5 of them steady"]


def step_tags(data: dict) -> list[tuple[str, ...]]:
    """Each real-data step's tags, from the record's columnar steps."""
    return [tuple(s.tags) for s in StepTable.from_json(StepRecord, data["steps"])]
