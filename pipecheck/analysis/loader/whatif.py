"""``pipecheck whatif``: a compare or dataloader record's measured settings, the loader model
fitted to them, and one setting's predicted D, step time, what binds, and the host's size;
and compare's self-check's choices: the setting it checks, and whether to read it longer.
Pure: the record is read by the caller."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.analysis.loader.tuner import BUFFER_LADDER, PREFETCH_FACTORS, THREAD_LADDER
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.records.common import Estimate
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.whatif import Interval, LoaderModelFit, WhatIfResult, WhatIfSetting
from pipecheck.units import ms

OWN_WORKERS = "the pipeline runs its own worker processes"
"""How a setting's warning begins when the pipeline fixes its own workers
(``data.grain_pipeline.OwnSettings.note``): nothing pipecheck sets would change."""

HOST_SEARCH_WORKERS = 4
"""Host sizing looks at up to 4x the host's cores in workers: latency-bound transforms
keep gaining past the cores, and no tuner ceiling goes further (DEFAULT_MAX_WORKERS: 2x)."""

MAX_KNOB = 1024
"""The largest worker, thread, buffer or prefetch count a prediction is asked for: beyond
it no machine runs the processes, and the model's extrapolation means nothing."""

CHECK_PRECISION = 0.05
"""A reading whose D interval's half-width is more than this share of D is read longer: the
goal is an error within 10% (docs/whatif.md), and a reading only +-5% sure leaves a
prediction 10% off no longer told from one within 5%."""

MAX_LONGER_SECONDS = 2.0
"""The longer reading's batches take at most this long at the D first read (plus the
workers' start-up with workers): compare's run time grows by a second or two at most."""

MAX_LONGER_BATCHES = 16_000
"""No longer reading times more batches than this, however short they are (eight times the
first reading's ceiling, ``measure.whatif_check.MAX_CHECK_BATCHES``)."""


@dataclasses.dataclass(frozen=True)
class Asked:
    """The setting asked for: each knob given, or None (the run's own choice)."""

    workers: int | None = None
    per_worker_buffer: int | None = None
    threads: int | None = None
    prefetch: int | None = None
    cores: int | None = None
    read_latency_s: float | None = None
    """Seconds every read of the source would take beyond those measured (None: as
    measured)."""


@dataclasses.dataclass(frozen=True)
class Measured:
    """What the model is fitted to and what a prediction is judged against, from a record."""

    kind: str
    settings: tuple[LoaderSetting, ...]
    base: GrainSettings
    """The knobs a what-if starts from: the compare run's choice, else the fastest setting."""
    cores: int
    ram_budget_mb: float | None
    target: Estimate | None = None
    real: Estimate | None = None
    chosen_loader: Estimate | None = None


def measured_of(record: CompareResult | DataloaderResult) -> Measured:
    """The measured settings and numbers of a compare or dataloader record; NotPredictable
    when the pipeline fixes its own settings (nothing to predict)."""
    cores = int(record.env.get("cpu_count") or 0) or 1
    if isinstance(record, CompareResult):
        if record.tuning.stop == "pipeline":
            raise lm.NotPredictable(_OWN_SETTINGS)
        est = record.estimates
        return Measured("compare", tuple(record.loader), record.tuning.chosen, cores,
                        record.tuning.ram_budget_mb, est.target, est.real, est.loader)
    if any(w.startswith(OWN_WORKERS) for s in record.results for w in s.warnings):
        raise lm.NotPredictable(_OWN_SETTINGS)
    fastest = min(record.results, key=lambda s: s.loader_time.value) if record.results \
        else None
    base = fastest.settings if fastest is not None else GrainSettings()
    return Measured("dataloader", tuple(record.results), base, cores, record.ram_budget_mb)


_OWN_SETTINGS = ("the pipeline fixes its own worker processes (its own mp_prefetch): no "
                 "setting pipecheck could change would run; return the dataset without "
                 "mp_prefetch to let pipecheck measure and predict the workers")


def setting_of(asked: Asked, base: GrainSettings, cores: int) -> WhatIfSetting:
    """The asked knobs over ``base``'s; a prefetch not given follows the threads when
    they were given."""
    threads = base.threads if asked.threads is None else asked.threads
    prefetch = asked.prefetch if asked.prefetch is not None else \
        (0 if asked.threads is not None else base.prefetch)
    g = GrainSettings(base.workers if asked.workers is None else asked.workers,
                      base.per_worker_buffer if asked.per_worker_buffer is None
                      else asked.per_worker_buffer, threads, prefetch)
    return WhatIfSetting.of(g, cores if asked.cores is None else asked.cores)


def _interval(e: Estimate) -> Interval:
    return Interval(e.value, e.low, e.high)


def interference_of(m: Measured) -> float | None:
    """R / max(T, D) at the setting the compare run chose (None without T and R)."""
    if m.target is None or m.real is None or m.chosen_loader is None:
        return None
    return interference(m.target, m.chosen_loader, m.real)


def interference(target: Estimate, chosen_loader: Estimate, real: Estimate) -> float | None:
    """R / max(T, D): how much slower real training ran than its slower part (None where it
    is not a number)."""
    slower = max(target.value, chosen_loader.value)
    return real.value / slower if slower > 0 and math.isfinite(real.value) else None


def host_sizing(model: LoaderModelFit, g: GrainSettings, goal_s: float, cores: int
                ) -> tuple[int | None, bool, GrainSettings | None]:
    """(fewest cores keeping up at ``g``, whether any setting keeps up on ``cores`` cores,
    the cheapest that does)."""
    grid = lm.candidate_settings(HOST_SEARCH_WORKERS * cores, THREAD_LADDER, BUFFER_LADDER,
                                 PREFETCH_FACTORS)
    best = lm.cheapest_keeping_up(model, grid, cores, goal_s)
    return lm.cores_needed(model, g, goal_s), best is not None, best


def what_if(record: CompareResult | DataloaderResult, source: str, asked: Asked
            ) -> WhatIfResult:
    """The prediction for the asked setting; NotPredictable says why there is none."""
    m = measured_of(record)
    fitted = lm.fit_loader_model(m.settings, m.cores, m.ram_budget_mb)
    reads = read_latency_reads(m.settings, asked.read_latency_s)
    model = fitted if reads is None else \
        lm.with_read_latency(fitted, asked.read_latency_s or 0.0, reads)
    setting = setting_of(asked, m.base, m.cores)
    loader = lm.predict_loader(model, setting.grain(), setting.cores)
    counted = bool(lm.reads_counted(m.settings))
    notes = [*_notes(loader, model, setting), *_latency_notes(asked, reads, counted)]
    interference = interference_of(m)
    step: Interval | None = None
    binding = loader.binding
    cores_needed: int | None = None
    keeps_up: bool | None = None
    host_setting: GrainSettings | None = None
    if m.target is not None:
        target = _interval(m.target)
        step, binding = lm.predict_step(loader.interval, target, interference or 1.0,
                                        loader.binding)
        if loader.over_memory:
            binding = lm.MEMORY
        goal = m.target.value * LOADER_HEADROOM
        cores_needed, keeps_up, host_setting = host_sizing(model, setting.grain(), goal,
                                                           m.cores)
    stage_s, precomputed = stage_what_if(m.settings, model, setting) if reads is None \
        else (None, None)
    return WhatIfResult(
        source=source, source_kind=m.kind, setting=setting, predicted_loader_s=loader.interval,
        predicted_step_s=step, binding=binding, loader_binding=loader.binding, model=fitted,
        target_s=_interval(m.target) if m.target is not None else None,
        interference=interference, cores_needed=cores_needed, host_keeps_up=keeps_up,
        host_setting=host_setting, stage_s=stage_s,
        precomputed_loader_s=precomputed.interval if precomputed else None,
        precomputed_binding=precomputed.binding if precomputed else None,
        notes=tuple(notes), env=dict(record.env),
        read_latency_s=asked.read_latency_s, reads_per_batch=reads)


def read_latency_reads(settings: Sequence[LoaderSetting], added_s: float | None
                       ) -> int | None:
    """Reads per batch the added latency applies to (None: no latency asked);
    MissingNumbers when the record holds no examples per batch to count them by."""
    if added_s is None:
        return None
    reads = lm.reads_per_batch(settings)
    if reads is None:
        raise lm.MissingNumbers(
            "its settings hold no examples per batch (examples_per_batch), so the reads a "
            "batch makes are unknown: written by an older pipecheck; measure again with "
            "this one")
    return reads


def _latency_notes(asked: Asked, reads: int | None, counted: bool) -> list[str]:
    if reads is None or asked.read_latency_s is None:
        return []
    how = "counted at the reading stage" if counted else "one per example"
    return [f"every read {ms(asked.read_latency_s)} slower: {reads} reads a batch ({how}) "
            f"add {ms(reads * asked.read_latency_s)} of waiting per batch, "
            "overlapped by each process's reads in flight (min(threads, prefetch)) and by "
            "the workers, using no CPU; the measured reads' own latency, bandwidth, a slow "
            "tail and caches are taken as measured (docs/whatif.md)"]


def stage_what_if(settings: Sequence[LoaderSetting], model: LoaderModelFit,
                  setting: WhatIfSetting) -> tuple[float | None, lm.Prediction | None]:
    """The transform stage's seconds per batch, and D at ``setting`` were its output
    precomputed (its interval widened as for a setting past those measured: no setting
    without the stage was measured)."""
    stage_s = lm.stage_seconds_per_batch(settings, model.stage)
    if stage_s is None:
        return None, None
    p = lm.predict_loader(lm.without_stage(model, stage_s), setting.grain(), setting.cores)
    i, w = p.interval, (1.0 if p.extrapolated else lm.EXTRAPOLATION_WIDENING)
    wider = Interval(i.value, max(0.0, i.value - w * (i.value - i.low)),
                     i.value + w * (i.high - i.value))
    return stage_s, dataclasses.replace(p, interval=wider)


def _notes(p: lm.Prediction, model: LoaderModelFit, s: WhatIfSetting) -> Sequence[str]:
    notes = []
    if p.extrapolated:
        w = model.max_workers_measured
        notes.append(f"past the settings measured (at most {w} worker{'' if w == 1 else 's'}, "
                     f"{model.max_reads_measured} parallel reads per process): the "
                     f"interval is widened {lm.EXTRAPOLATION_WIDENING:g}x")
    if p.over_memory:
        notes.append(f"{s.workers} workers need about {lm.memory_mb(model, s.grain()):.0f} MB, "
                     f"over the RAM budget of {model.ram_budget_mb:.0f} MB")
    if s.cores != model.cores:
        notes.append(f"measured on {model.cores} cores; predicted for {s.cores} (only the "
                     "cores' floor moves: the transforms' and the training process's costs "
                     "per batch are taken as measured)")
    return notes


def check_setting(measured: Sequence[GrainSettings], chosen: GrainSettings,
                  max_workers: int) -> GrainSettings | None:
    """The setting compare's self-check measures: next to the chosen one (one worker more,
    twice the read threads, one worker fewer, half the threads, in that order; without
    workers, twice the threads first: no worker process to start) and not measured yet;
    None when every neighbour was."""
    def same(a: GrainSettings, b: GrainSettings) -> bool:
        if a.workers == 0 and b.workers == 0:  # the per-worker buffer means nothing there
            return (a.threads, a.prefetch) == (b.threads, b.prefetch)
        return a == b

    w, t = chosen.workers, chosen.threads
    options = [dataclasses.replace(chosen, workers=w + 1) if w < max_workers else None,
               dataclasses.replace(chosen, threads=2 * max(1, t), prefetch=0),
               dataclasses.replace(chosen, workers=w - 1) if w > 0 else None,
               dataclasses.replace(chosen, threads=t // 2, prefetch=0) if t > 1 else None]
    if w == 0:
        options[0], options[1] = options[1], options[0]
    for g in options:
        if g is not None and not any(same(g, m) for m in measured):
            return g
    return None


def too_unsure(d: Interval) -> bool:
    """Whether the reading ``d`` is too unsure to judge a 10% error: its interval's
    half-width above ``CHECK_PRECISION`` of its value (or no usable value)."""
    width = d.relative_half_width()
    return not math.isfinite(width) or width > CHECK_PRECISION


def plus_minus(width: float) -> str:
    """A relative half-width as the check says it: ``+-4.9%`` under 10% (where it is
    weighed against ``CHECK_PRECISION``), ``+-12%`` above."""
    return f"+-{100 * width:.1f}%" if width < 0.1 else f"+-{100 * width:.0f}%"


def longer_batches(batches: int, d: Interval) -> int | None:
    """Batches for a longer reading of a setting read over ``batches`` at ``d``: enough for
    its interval to narrow to ``CHECK_PRECISION`` (a mean's interval narrows as the square
    root of the batches), at least twice ``batches``, within ``MAX_LONGER_SECONDS`` at
    ``d`` and ``MAX_LONGER_BATCHES``. None when ``d`` is sure enough, has no usable value,
    or the bound allows fewer than twice ``batches``."""
    width = d.relative_half_width()
    if not too_unsure(d) or not (math.isfinite(width) and d.value > 0):
        return None
    # rounded first: 125 x (0.12 / 0.05)^2 is 720.0000000000001 in floating point
    wanted = max(2 * batches, math.ceil(round(batches * (width / CHECK_PRECISION) ** 2, 6)))
    n = min(wanted, math.floor(MAX_LONGER_SECONDS / d.value), MAX_LONGER_BATCHES)
    return n if n >= 2 * batches else None
