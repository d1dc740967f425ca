"""compare's self-check: after choosing, one loader setting the model did not see is
predicted from the settings measured, then measured (a few dozen batches, at least a
quarter of a second of them); read once more, longer, when that reading is too unsure to
judge a 10% error (``analysis.loader.whatif.longer_batches``: within two seconds of batches)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

from pipecheck.analysis.loader.loader_model import NotPredictable, fit_loader_model, predict_loader
from pipecheck.analysis.loader.whatif import (
    CHECK_PRECISION,
    MAX_LONGER_SECONDS,
    check_setting,
    longer_batches,
    plus_minus,
    too_unsure,
)
from pipecheck.data.grain_pipeline import read_elements_per_batch
from pipecheck.data.per_setting import at_setting
from pipecheck.measure.dataloader import LoaderParts, measure_setting
from pipecheck.measure.loader_search import (
    TUNING_STAGE_WAIT_S,
    LoaderChoice,
    SearchOptions,
    batches_for,
)
from pipecheck.measure.page_cache import CacheWatch
from pipecheck.progress import Progress
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.whatif import Interval, WhatIfCheck, WhatIfSetting
from pipecheck.units import ms

CHECK_BATCHES = 24
"""The fewest batches timed for the check (more where workers buffer many at start-up):
about what a tuning trial times, enough for D within ~10% on a loader of steady batches."""

CHECK_SECONDS = 0.25
"""The check times at least this long, as predicted: 24 batches of 2 ms (a tokenizing
pipeline on two workers) take 50 ms, a mean that one scheduling hiccup of a few
milliseconds moves by 10% or more; over a quarter of a second the same hiccup moves it by
about 2%, for at most ~0.2 s more per compare. The machine's own drift from one reading to
the next (the same setting's readings over a second apart by +-5-18% on the demo,
benchmarks/whatif_accuracy.py) no window removes."""

MAX_CHECK_BATCHES = 2000
"""No more batches than this, whatever the prediction."""

MAX_SPEEDUP = 4.0
"""The check's batch count takes the setting as at most this many times faster than the
fastest setting measured: a prediction far too fast (0.1 ms against a pipeline that takes
25 ms) would otherwise time 2,000 batches of 25 ms."""


def check_batches(predicted_s: float, fastest_measured_s: float = math.nan) -> int:
    """Batches to time for a setting predicted at ``predicted_s`` per batch: enough for
    ``CHECK_SECONDS`` (the setting taken as no faster than ``MAX_SPEEDUP`` times the fastest
    measured), at least ``CHECK_BATCHES``, at most ``MAX_CHECK_BATCHES``."""
    if math.isfinite(fastest_measured_s) and fastest_measured_s > 0:
        predicted_s = max(predicted_s, fastest_measured_s / MAX_SPEEDUP)
    if not (math.isfinite(predicted_s) and predicted_s > 0):
        return CHECK_BATCHES
    return min(MAX_CHECK_BATCHES, max(CHECK_BATCHES, math.ceil(CHECK_SECONDS / predicted_s)))


@dataclasses.dataclass(frozen=True)
class Reading:
    """The checked setting as read: the reading kept, the batches it timed, how many
    readings were taken, and the first when there were more."""

    setting: LoaderSetting
    batches: int
    reads: int = 1
    first: LoaderSetting | None = None


def read_until_sure(measure: Callable[[int], LoaderSetting], batches: int,
                    progress: Progress) -> Reading:
    """The setting read by ``measure`` over ``batches`` and, while its D is too unsure to
    judge a 10% error, once more over ``longer_batches`` (replacing it: a window of its own,
    started afresh); each reading, and why it was or was not read longer, said on
    ``progress``."""
    first = measure(batches)
    progress.say(f"      measured {_said(first)}")
    d = _interval(first)
    if not too_unsure(d):
        return Reading(first, batches)
    more = longer_batches(batches, d)
    if more is None:
        why = (f"twice the batches take more than {MAX_LONGER_SECONDS:g} s"
               if math.isfinite(d.value) and d.value > 0 else "no D to size a reading by")
        progress.say(f"      wider than +-{100 * CHECK_PRECISION:.0f}%; not read longer: {why}")
        return Reading(first, batches)
    progress.say(f"      too unsure to judge a 10% error: reading {more} batches")
    last = measure(more)
    progress.say(f"      measured {_said(last)}"
                 + (" (still too unsure: judged as read)" if too_unsure(_interval(last))
                    else ""))
    return Reading(last, more, 2, first)


def _said(s: LoaderSetting) -> str:
    width = _interval(s).relative_half_width()
    sure = f" {plus_minus(width)}" if math.isfinite(width) else ""
    return f"{ms(s.loader_time.value)}{sure}"


def _interval(s: LoaderSetting) -> Interval:
    d = s.loader_time
    return Interval(d.value, d.low, d.high)


def whatif_check(parts: LoaderParts, loader: LoaderChoice, opts: SearchOptions, cores: int,
                 progress: Progress, clock: Callable[[], float] = time.perf_counter
                 ) -> WhatIfCheck | None:
    """The check, or None (said on progress) when there is nothing to check: settings read
    from a file, a multi-process run, a pipeline fixing its own settings, a model that
    cannot be fitted, or every neighbour of the choice measured already."""
    dataset = parts.dataset
    if dataset is None or opts.agree is not None or loader.tuning.stop == "pipeline":
        return None
    try:
        model = fit_loader_model(loader.settings, cores, opts.ram_budget_mb)
    except NotPredictable as e:
        progress.say(f"      what-if self-check skipped: {e}")
        return None
    g = check_setting([s.settings for s in loader.settings], loader.chosen.settings,
                      opts.max_workers)
    if g is None:
        progress.say("      what-if self-check skipped: every setting next to the chosen one "
                     "was measured")
        return None
    g = parts.own.applied(g)
    predicted = predict_loader(model, g, cores)
    fastest = min((m.loader_time.value for m in loader.settings
                   if math.isfinite(m.loader_time.value)), default=math.nan)
    n = batches_for(g.workers, check_batches(predicted.interval.value, fastest),
                    g.per_worker_buffer, g.prefetch,
                    read_elements_per_batch(at_setting(dataset, g)))
    progress.say(f"[2/4] what-if self-check: {g.label()}, predicted "
                 f"{ms(predicted.interval.value)}; measuring {n} batches")

    def measure(batches: int) -> LoaderSetting:
        return measure_setting(dataset, g, batches, put=parts.put, tokens_key=parts.tokens_key,
                               timeout_s=opts.timeout_s, clock=clock,
                               stage_wait_s=TUNING_STAGE_WAIT_S, own=parts.own,
                               cache=CacheWatch(parts.files, opts.cold))

    r = read_until_sure(measure, n, progress)
    return WhatIfCheck(WhatIfSetting.of(g, cores), predicted.interval,
                       _interval(r.setting), predicted.binding, batches=r.batches,
                       reads=r.reads,
                       first_measured_loader_s=None if r.first is None else _interval(r.first))
