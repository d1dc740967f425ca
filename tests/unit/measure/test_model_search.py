"""compare's loader stage with ``--search model``: the loader model picks the settings."""

from __future__ import annotations

from pipecheck.analysis.loader.model_tuner import MAX_TRIALS, trial_of
from pipecheck.data.grain_pipeline import OwnSettings
from pipecheck.measure import loader_search as ls
from pipecheck.records.grain_settings import GrainSettings

from ..analysis.grain_sim import SimPipeline
from ..analysis.test_loader_model import measured


def _search(search: str):
    sim = SimPipeline(sleep_s=0.120)
    asked = []

    def measure_loader(g):
        asked.append(g)
        return measured(sim, g)

    opts = ls.SearchOptions(batches=20, threads=1, max_workers=8, search=search)
    out = ls._tuning(OwnSettings(), GrainSettings(), opts,
                     lambda g: trial_of(measure_loader(g)), 0.030, 2, 8, 4096.0,
                     measure_loader)
    return out, asked


def test_model_search_measures_at_most_four_settings_where_the_joint_search_measures_more():
    model, asked_model = _search("model")
    joint, asked_joint = _search("joint")
    assert len(asked_model) <= MAX_TRIALS < len(asked_joint)
    assert model.meets_target and joint.meets_target
    assert model.reason.startswith("measured the settings the loader model picked")
    # a latency-bound stage: the model asks for read threads, beyond the workers
    assert len({g.threads for g in asked_model}) > 1


def test_model_search_is_the_default():
    assert ls.SearchOptions(batches=20, threads=1, max_workers=8).search == "model"
    assert ls.SEARCHES[0] == "model"
