"""The model-guided search on simulated pipelines (grain_sim: cost rules written for the
tuner, not for the loader model), against the exhaustive grid, in at most 4 settings."""

from __future__ import annotations

import pytest

from pipecheck.analysis.loader.model_tuner import MAX_TRIALS, tune_by_model
from pipecheck.analysis.loader.tuner import choose
from pipecheck.analysis.verdict import LOADER_HEADROOM

from .grain_sim import SimPipeline, grid
from .test_loader_model import measured
from .test_tuner_joint import PIPELINES

GRID = grid(8)


def _run(name):
    sim, target = PIPELINES[name]
    asked = []

    def measure(g):
        asked.append(g)
        return measured(sim, g)

    out = tune_by_model(measure, target, max_workers=8, cores=2, candidates=GRID)
    best, best_ok = choose([SimPipeline(**{k: getattr(sim, k) for k in (
        "sleep_s", "cpu_s", "consumer_s", "cores", "contention")}).trial(s) for s in GRID],
        target)
    return out, best, best_ok, target, asked


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_model_guided_search_reaches_95_percent_of_the_grid_in_4_settings(name):
    out, best, best_ok, target, asked = _run(name)
    assert len(asked) <= MAX_TRIALS, asked
    if best_ok:  # the grid meets the goal: so does the search
        assert out.meets_target and out.chosen.batch_s <= target * LOADER_HEADROOM, asked
    else:  # out of reach: at least 95% of the grid's choice's throughput
        assert best.batch_s / out.chosen.batch_s >= 0.95, (out.chosen, best, asked)
