"""Pure: what each change a compare record supports would buy per step, and the headspace.

The headspace is R less T (``compare_headspace``): what any input, sync or host-work fix can
buy at most, since the device still computes T a step; its ends come from the two
estimates' intervals. Each gain (``records.gains.Gain``) is a range of seconds a step, over
R, the real-data median, and ranked by its high end:

- ``loader-setting``: the setting the search chose against the first one it measured. R ran
  at the chosen setting (its ``measured_step_s``); where compare trained at the first one
  too (``estimates.real_baseline``), the gain is the two Rs' difference, ``measured``;
  else the first setting's step is predicted from its D and T (the slower of the two, times
  the interference R / max(T, D) measured at the chosen one), ``model``.
  Another setting the loader model predicts faster (``analysis.loader.whatif``): ``model``;
- ``sync``: each sync site compare's sampler found in the user's code: at most its wait a
  step and R less the slower of T and D (the device still computes, the loader still
  loads); at least 0, since compare times the host only (``loop_verdict.overlap_unknown_why``
  says why); its expected step is the high end's, which a loop that dispatches ahead of the
  device reaches;
- ``stage``: the dominant stage's output precomputed (``whatif.stage_what_if``), ``model``;
- ``cores``: the fewest host cores the model says keep up at the chosen setting
  (``whatif.host_sizing``), ``model``;
- ``prefetch``: a loader that keeps up on average whose batches still kept R's steps
  waiting: at most that wait, ``bound``; expected all of it where the training thread loads
  each batch itself (read threads take that off its path), half where the loader already
  runs beside the step (bursts: ``PREFETCH_BURST_SHARE``);
- ``host-work``: checkpoint, eval and gc spans in R's steps, amortized over every step (the
  steady median R leaves those steps out, so this gain is over R plus them), ``bound``.

A change whose expected gain (its predicted step's value against R; a ``bound`` range with
a low end of 0, its middle) is under ``MATERIAL_GAIN_SHARE`` of R is left out. When R is
within ``NEAR_FLOOR_MARGIN`` of T a note says no further change buys more than that margin.
A number a gain needs that the record lacks leaves that gain out, with a note saying why.
"""

from __future__ import annotations

import math

from pipecheck.analysis.gain_ranges import (
    RecordGains,
    bound_gain,
    near_floor_note,
    ranked,
    sync_sites,
)
from pipecheck.analysis.loader import loader_model as lm
from pipecheck.analysis.loader.tuner import BUFFER_LADDER, PREFETCH_FACTORS, THREAD_LADDER
from pipecheck.analysis.loader.whatif import (
    host_sizing,
    interference,
    measured_of,
    stage_what_if,
)
from pipecheck.analysis.loop_verdict import MATERIAL_GAIN_SHARE, overlap_unknown_why
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.records.common import Estimate
from pipecheck.records.compare import CompareResult
from pipecheck.records.gains import Gain, GainKind, GainRange, StepInterval
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.whatif import Interval, LoaderModelFit, WhatIfSetting
from pipecheck.units import ms, short_location

CANDIDATE_WORKERS_PER_CORE = 2
"""Other loader settings are looked at up to 2 workers per host core (at least
``CANDIDATE_MIN_WORKERS``): the search's own default ceiling."""

CANDIDATE_MIN_WORKERS = 8
"""The fewest workers other loader settings are looked at up to, on a small host."""

PREFETCH_BURST_SHARE = 0.5
"""The share of the steps' wait for batches a deeper prefetch is expected to hide when the
loader keeps up on average and already runs beside the step: its waits are bursts, and how
many of them a deeper buffer absorbs is not in the record (the range runs 0 to all of it)."""

HOOK_SPANS = ("checkpoint", "eval", "gc")
"""The host spans of work a loop can move off its path or do less often."""


def compare_headspace(target: Estimate, real: Estimate) -> StepInterval | None:
    """R less T per step, its ends from the intervals (never below 0); None when either
    estimate is unusable."""
    if not (target.usable and real.usable):
        return None
    return StepInterval(max(0.0, real.value - target.value), max(0.0, real.low - target.high),
                        max(0.0, real.high - target.low))


def compare_gains(r: CompareResult) -> RecordGains:
    """Pure: the headspace, the gains ranked by their high end, and the notes."""
    est = r.estimates
    headspace = compare_headspace(est.target, est.real)
    if headspace is None:
        return RecordGains(None, (), ("no gains: T or R has too few samples to subtract "
                                       "(run more steps)",))
    notes = [n for n in (near_floor_note(est.target, est.real),) if n]
    gains = [*_sync_gains(r, headspace), *_prefetch_gains(r, headspace), *_host_work_gains(r)]
    chosen = _chosen_setting_gain(r)
    gains += [chosen] if chosen is not None else []
    model, why_not = _fitted(r)
    if model is None:
        notes.append(f"no loader-model gains (other settings, a stage precomputed, more "
                     f"cores): {why_not}")
    else:
        gains += _model_gains(r, model)
    return RecordGains(headspace, ranked(gains), tuple(notes))


def _material(r: CompareResult, gain_s: float) -> bool:
    return gain_s >= MATERIAL_GAIN_SHARE * r.estimates.real.value


def _modelled(kind: GainKind, change: str, real: Estimate, step: Interval, why: str
              ) -> Gain:
    """A gain the loader model predicts: R less the predicted step's interval."""
    return Gain(kind=kind, change=change,
                predicted_step_s=StepInterval(step.value, step.low, step.high),
                gain_s=GainRange(max(0.0, real.value - step.high),
                                 max(0.0, real.value - step.low)), how="model", why=why)


def _sync_gains(r: CompareResult, headspace: StepInterval) -> list[Gain]:
    """Each sync site's gain: at most its wait and R less the slower of T and D."""
    est = r.estimates
    why_low = overlap_unknown_why(str(r.env.get("backend", "")), "compare")
    floor = max(est.target.value, est.loader.value)
    floor_low = max(est.target.low, est.loader.low)
    out = []
    for location, wait in sync_sites(r.findings):
        expected = min(wait, max(0.0, est.real.value - floor))
        high = min(wait, max(0.0, est.real.high - floor_low), headspace.high)
        if not _material(r, expected):
            continue
        out.append(bound_gain(
            "sync", f"read the value at {short_location(location)} one step later, or every "
            "N steps", est.real.value, 0.0, max(high, expected), expected,
            f"at most its wait ({ms(wait)} a step) and R less the slower of T and D (the "
            f"device still computes, the loader still loads); at least 0: {why_low}"))
    return out


def _prefetch_gains(r: CompareResult, headspace: StepInterval) -> list[Gain]:
    """Batches waited for in R's steps although the loader keeps up on average: read threads
    where the training thread loads each batch itself (its whole wait is its own loading, on
    its path: expected all of it, as far as the headspace goes), a deeper prefetch where
    they run already (bursts, which a buffer hides in part: expected half)."""
    est, wait = r.estimates, r.host_spans.get("data_wait", 0.0)
    if not est.loader.high <= est.target.value or not math.isfinite(wait):
        return []
    chosen = r.tuning.chosen
    inline = chosen.workers == 0 and chosen.threads == 0
    high = min(wait, headspace.high)
    expected = min(wait, headspace.value) * (1.0 if inline else PREFETCH_BURST_SHARE)
    if not _material(r, expected):
        return []
    if inline:
        change = ("read threads with a prefetch, so batches load beside the step (the "
                  "training thread loads each one itself now)")
        wait_is = "its own loading, all of it on the step's path"
    else:
        change = ("a larger prefetch (more read threads or a deeper per-worker buffer), so a "
                  "batch is ready when a step asks")
        wait_is = "the loader keeping up on average: bursts, half of it expected hidden"
    return [bound_gain("prefetch", change, est.real.value, 0.0, high, expected,
                   f"at most the steps' wait for batches ({ms(wait)} a step, {wait_is}) and "
                   "the headspace; at least 0: the device may compute queued work meanwhile")]


def _host_work_gains(r: CompareResult) -> list[Gain]:
    """Checkpoint, eval and gc spans in R's steps, amortized over the steps (the first,
    compiling one left out)."""
    steps = r.steps[1:]
    if not steps:
        return []
    out = []
    for name in HOOK_SPANS:
        total = sum(float(s.spans.get(name, 0.0)) for s in steps)
        per_step = total / len(steps)
        if not math.isfinite(per_step) or not _material(r, per_step / 2):
            continue
        out.append(bound_gain(
            "host-work", f"the {name} off the loop (asynchronous) or less often",
            r.estimates.real.value + per_step, 0.0, per_step, per_step / 2,
            f"at most the {name} spans' {ms(total)} over {len(steps)} steps, amortized (over "
            "R plus them: R's median leaves those steps out); at least 0: the device may run "
            "queued steps during it"))
    return out


def _interval(e: Estimate) -> Interval:
    return Interval(e.value, e.low, e.high)


def _chosen_setting_gain(r: CompareResult) -> Gain | None:
    """The chosen setting against the first one measured (None: it was the first, or D at
    the first is unknown): measured where compare trained at both, else the first setting's
    step predicted."""
    est, first = r.estimates, (r.loader[0] if r.loader else None)
    if est.baseline is None or first is None or first.settings == r.tuning.chosen:
        return None
    target, real = _interval(est.target), _interval(est.real)
    measured = r.sources.get("real") == "measured"
    # R at the chosen setting gives the interference; a loop's own R (--real) does not
    f = (interference(est.target, est.loader, est.real) or 1.0) if measured else 1.0
    predicted, _ = lm.predict_step(_interval(est.baseline), target, f, "")
    both = est.real_baseline is not None and est.real_baseline.usable and measured
    start = _interval(est.real_baseline) if both and est.real_baseline else predicted
    chosen = real if measured else lm.predict_step(_interval(est.loader), target, 1.0, "")[0]
    gain = GainRange(max(0.0, start.low - chosen.high), max(0.0, start.high - chosen.low))
    if not _material(r, start.value - chosen.value):
        return None
    from_label = first.settings.short_label()
    if both:
        why = (f"R measured at both: {ms(start.value)} at the first setting, "
               f"{ms(real.value)} at the chosen one (the loader model had predicted "
               f"{ms(predicted.value)} at the first, from its D and T)")
    elif measured:
        why = (f"R measured at it ({ms(real.value)}); the first setting's step predicted "
               f"({ms(start.value)}) from its D ({ms(est.baseline.value)}) and T: compare ran "
               "R at the chosen setting only (--no-measure-gain)")
    else:
        why = "R is your loop's own (--real); both steps predicted from their D and T"
    return Gain(kind="loader-setting", change=f"{r.tuning.chosen.short_label()} (the chosen "
                f"setting) instead of {from_label}",
                predicted_step_s=StepInterval(chosen.value, chosen.low, chosen.high),
                gain_s=gain, how="measured" if both else "model",
                measured_step_s=real.value if measured else None, why=why)


def _fitted(r: CompareResult) -> tuple[LoaderModelFit | None, str]:
    """The loader model fitted to the record's settings, or None and why not."""
    try:
        m = measured_of(r)
        return lm.fit_loader_model(m.settings, m.cores, m.ram_budget_mb), ""
    except lm.NotPredictable as e:
        return None, str(e)


def _model_gains(r: CompareResult, model: LoaderModelFit) -> list[Gain]:
    """Another setting, the stage precomputed and more cores, as the loader model predicts
    them (each against R, with the interference measured at the chosen setting)."""
    est, cores = r.estimates, int(r.env.get("cpu_count") or 0) or 1
    target, chosen = _interval(est.target), r.tuning.chosen
    f = interference(est.target, est.loader, est.real) or 1.0
    out: list[Gain] = []

    def add(kind: GainKind, change: str, loader: Interval, why: str) -> None:
        step, _ = lm.predict_step(loader, target, f, "")
        if _material(r, est.real.value - step.value):
            out.append(_modelled(kind, change, est.real, step, why))

    best = _best_setting(model, chosen, cores, target, f)
    if best is not None:
        add("loader-setting", best.short_label(), lm.predict_loader(model, best, cores).interval,
            "the loader model's D at it, and T, times the interference measured at the "
            "chosen setting (docs/whatif.md)")
    stage_s, pre = stage_what_if(r.loader, model, WhatIfSetting.of(chosen, cores))
    if stage_s is not None and pre is not None:
        add("stage", f"the {model.stage} stage's output precomputed or cached "
            f"({ms(stage_s)} a batch)", pre.interval,
            "the loader model without that stage's time (no setting without it was measured: "
            "the interval widened)")
    needed, _, _ = host_sizing(model, chosen, est.target.value * LOADER_HEADROOM, cores)
    if needed is not None and needed > cores:
        add("cores", f"{needed} host cores (now {cores}) at {chosen.short_label()}",
            lm.predict_loader(model, chosen, needed).interval,
            "the fewest cores the loader model says keep up with T at the chosen setting "
            "(only the cores' floor moves)")
    return out


def _best_setting(model: LoaderModelFit, chosen: GrainSettings, cores: int,
                  target: Interval, f: float) -> GrainSettings | None:
    """The setting other than the chosen one with the fastest predicted step (the cheapest
    of equals), within the RAM budget; None when none is predicted faster."""
    ceiling = max(CANDIDATE_MIN_WORKERS, CANDIDATE_WORKERS_PER_CORE * cores)
    grid = lm.candidate_settings(ceiling, THREAD_LADDER, BUFFER_LADDER, PREFETCH_FACTORS)
    now = lm.predict_step(lm.predict_loader(model, chosen, cores).interval, target, f, "")[0]
    best, best_s = None, now.value
    for g in grid:
        p = lm.predict_loader(model, g, cores)
        step = lm.predict_step(p.interval, target, f, "")[0].value
        if not p.over_memory and not lm.same_to_model(g, chosen) and step < best_s:
            best, best_s = g, step
    return best
