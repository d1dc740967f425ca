"""A search over Grain's knobs that asks the loader model which setting to measure next.
Pure logic over an injected measurement.

Measure no workers, then one worker (the model needs a setting with workers to tell the
transforms' cost from the training process's); then, up to ``MAX_TRIALS`` settings in all:
fit the model (``loader_model``) to what was measured, and measure the cheapest setting it
predicts to meet the goal (D <= ``LOADER_HEADROOM`` x T), or, when none is predicted to, the
cheapest within ``MIN_GAIN`` of the fastest predicted. Stop when the model's pick was
measured already or a measured setting it predicted to meet the goal does. The choice among
the measured settings is the tuner's own rule (``tuner.choose``).

Where the model cannot be fitted (too few or too noisy settings), the next worker count is
the one perfect scaling predicts (``ceil(W x D(W) / goal)``), as ``tuner.tune_grain`` does.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.analysis.loader.storage import (
    evidence_of,
    is_storage_bound,
    read_threads_for,
    storage_note,
    threads_first_reason,
)
from pipecheck.analysis.loader.tuner import (
    BUFFER_LADDER,
    MIN_GAIN,
    PREFETCH_FACTORS,
    THREAD_LADDER,
    Trial,
    TuningOutcome,
    outcome,
)
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, GrainSettings

MAX_TRIALS = 4
"""Settings measured at most: issue 30's goal (the joint search measures 7-10 of 42)."""


def trial_of(s: LoaderSetting) -> Trial:
    """A measured setting as the tuner's Trial (D, start-up, memory, its reads waiting on
    storage)."""
    r = s.resources
    return Trial(s.settings, s.loader_time.value, first_batch_s=s.first_batch_s,
                 worker_rss_mb=r.worker_rss_mb if r is not None else math.nan,
                 main_rss_mb=r.main_rss_mb if r is not None else math.nan,
                 storage=storage_note(s))


def key(g: GrainSettings) -> GrainSettings:
    """A setting as it runs: the per-worker buffer means nothing without workers."""
    return dataclasses.replace(g, per_worker_buffer=DEFAULT_PER_WORKER_BUFFER) \
        if g.workers == 0 else g


def next_setting(model: lm.LoaderModelFit, candidates: Sequence[GrainSettings],
                 cores: int, goal_s: float) -> tuple[GrainSettings, bool] | None:
    """The setting to measure next and whether the model predicts it meets the goal."""
    predicted = {}
    for g in candidates:
        p = lm.predict_loader(model, g, cores)
        if not p.over_memory:
            predicted[g] = p.interval.value
    if not predicted:
        return None
    meeting = [g for g, d in predicted.items() if d <= goal_s]
    if meeting:
        return min(meeting, key=GrainSettings.cost), True
    fastest = min(predicted.values())
    near = [g for g, d in predicted.items() if d <= fastest * (1 + MIN_GAIN)]
    return min(near, key=GrainSettings.cost), False


def _scaling_guess(measured: Sequence[LoaderSetting], goal_s: float,
                   max_workers: int) -> GrainSettings | None:
    """Perfect scaling's worker count from the setting with the most workers, or, when that
    count was measured, its nearest neighbour not measured (the count past a peak may be
    slower: a CPU-bound transform on few cores); None when all three were."""
    most = max(measured, key=lambda s: s.workers)
    w = max(1, most.workers)
    guess = min(max_workers, max(w + 1, math.ceil(w * most.loader_time.value / goal_s)))
    seen = {key(s.settings) for s in measured}
    for n in (guess, guess - 1, guess + 1):
        g = key(dataclasses.replace(most.settings, workers=n))
        if 1 <= n <= max_workers and g not in seen:
            return g
    return None


def tune_by_model(measure: Callable[[GrainSettings], LoaderSetting], target_s: float, *,
                  max_workers: int, cores: int, ram_budget_mb: float | None = None,
                  run_steps: int = 0, candidates: Sequence[GrainSettings] | None = None
                  ) -> TuningOutcome:
    """The model-guided search (module docstring); ``candidates``: the settings it may pick
    (default: the tuner's ladders up to ``max_workers``)."""
    goal = target_s * LOADER_HEADROOM
    pool = [key(g) for g in (candidates if candidates is not None else lm.candidate_settings(
        max_workers, THREAD_LADDER, BUFFER_LADDER, PREFETCH_FACTORS))]
    measured: dict[GrainSettings, LoaderSetting] = {}

    def run(g: GrainSettings) -> LoaderSetting:
        s = measure(g)
        measured[key(g)] = s
        return s

    reason = "measured the settings the loader model picked"
    first = run(GrainSettings(0))
    e = evidence_of(first)
    order = ""
    if e is not None and is_storage_bound(e) and first.loader_time.value > goal:
        # reads wait on storage: enough read threads to hide them, before any worker
        order = threads_first_reason(e)
        run(GrainSettings(0, threads=read_threads_for(e, goal)))
    if min(s.loader_time.value for s in measured.values()) > goal and max_workers >= 1:
        run(GrainSettings(1))
    while len(measured) < MAX_TRIALS and not any(
            s.loader_time.value <= goal for s in measured.values()):
        left = [g for g in pool if not any(lm.same_to_model(g, m) for m in measured)]
        try:
            model = lm.fit_loader_model(list(measured.values()), cores, ram_budget_mb)
            pick = next_setting(model, left, cores, goal)
        except lm.NotPredictable as e:
            reason = f"the model could not be fitted ({e}): perfect scaling picked"
            guess = _scaling_guess(list(measured.values()), goal, max_workers)
            pick = None if guess is None else (guess, False)
        if pick is None or pick[0] in measured:
            break
        run(pick[0])
    trials = [trial_of(s) for s in measured.values()]
    result = outcome(trials, target_s, cores, "met" if any(
        t.batch_s <= goal for t in trials) else "no-gain", reason, run_steps)
    return dataclasses.replace(result, order=order)
