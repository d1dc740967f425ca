"""``pipecheck diff``: two runs side by side, with significance and effect size.

A run is a pipecheck result (any kind with ``steps``, ``env`` and ``config``, read from
the JSON object so kinds this module has never heard of still work) or a MaxText training
log (read by ``logs``); both are reduced to a ``RunSummary`` first, so every row of the
comparison is computed the same way whatever the runs came from.

The headline is the steady-state median step time. Its difference is significant only
when the block-bootstrap interval of the median difference excludes zero *and* the
Mann-Whitney U test agrees (``stats.median_difference``); otherwise the report says
"not significant" in those words.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np

from pipecheck import stats
from pipecheck.analysis import anomalies, between_runs
from pipecheck.analysis.comparable import (
    not_comparable,
    side_unchecked,
    unchecked,
    unchecked_line,
    within_side,
)
from pipecheck.analysis.machine_load import MIN_PHASE_WALL_S
from pipecheck.analysis.steady_state import steady_mask, step_anomalies
from pipecheck.errors import ResultFormatError
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.codec import SERIAL, ArrayEncoder, float_column
from pipecheck.records.common import Distribution, StepRecord
from pipecheck.records.diff import (
    DEFAULT_CONFIDENCE,
    BetweenRuns,
    DiffResult,
    DiffRow,
    NotComparable,
    RunSummary,
    VersionRow,
)
from pipecheck.records.env import ENV_KEYS_THAT_MATTER, env_differences
from pipecheck.records.imported import Anomaly, ImportedRun
from pipecheck.records.monitor import RunEnd
from pipecheck.records.steps import StepTable
from pipecheck.records.versions import upgrade
from pipecheck.units import ms, p_value

VERSION_KEYS = ("jax", "jaxlib", "backend", "device_kind", "device_count")

MAX_LISTED_DIFFERENCES = 8

MIN_CHANGE = 0.04
"""The smallest change of the median step time (relative to A's) the verdict calls
significant when each side is one run. The steps' own test (bootstrap and Mann-Whitney)
sees only the noise within each run; two runs of one workload differ by more than that
(start-up, compile, what else ran on the machine), which the steps' test alone calls
significant. A difference smaller than this is reported, with the steps' test, as not
significant. benchmarks/diff_power.py on the shared 2-core machine (docs/performance.md),
runs of synthetic's default 160 steps: identical runs 0 of 12 significant at 4% or 5%; a
+5% step detected in 7 of 8 pairs at 4% and 5 of 8 at 5% (a floor at the change itself
lets about half its pairs fall under it). With several runs on a side the between-run
spread is measured (``analysis.between_runs``) and no floor is needed:
``default_min_change``."""


def default_min_change(runs_a: int, runs_b: int) -> float:
    """The ``min_change`` a diff of ``runs_a`` runs of A and ``runs_b`` of B uses unless
    ``--min-change`` is given: ``MIN_CHANGE`` for one run a side, else 0 (the test over the
    runs' medians already allows for how much runs differ)."""
    return MIN_CHANGE if runs_a == 1 and runs_b == 1 else 0.0


# --- reading runs ------------------------------------------------------------------------


def _final_loss(steps: StepTable[StepRecord]) -> float | None:
    losses = steps.column("loss")
    finite = np.flatnonzero(np.isfinite(losses))
    return float(losses[finite[-1]]) if finite.size else None


def _steps_of(raw: Mapping[str, object], origin: str) -> StepTable[StepRecord]:
    """The ``steps`` of any run kind: only the fields every kind shares are read."""
    return StepTable.from_json(StepRecord, raw, f"{origin}: steps")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _anomalies_of(data: Mapping[str, object], steps: StepTable[StepRecord],
                  origin: str) -> tuple[Anomaly, ...]:
    """The anomalies a record holds (explained with its compile events), or for a record
    without them, those the steady-state rule finds in its steps."""
    stored = data.get("anomalies")
    if isinstance(stored, list):
        try:
            return tuple(Anomaly.from_dict(a) for a in stored)
        except ResultFormatError as e:
            raise ResultFormatError(f"{origin}: anomalies: {e}") from None
    return tuple(step_anomalies(steps))


def _rates_per_device(data: Mapping[str, object], env: Mapping[str, object],
                      throughput: Mapping[str, object], times: Sequence[float], med: float
                      ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """TFLOP/s and tokens/s per device for each steady step, from the record's FLOPs per
    step and tokens/s (empty when it has none)."""
    devices = _number(env.get("device_count")) or 1.0
    flops = _number(throughput.get("flops_per_step"))
    tflops = tuple(flops / t / 1e12 / devices for t in times if t > 0) if flops else ()
    tokens_per_s = _number(throughput.get("tokens_per_s"))
    if not tokens_per_s:
        return tflops, ()
    # the record's tokens/s is tokens per step over its own steady-state median
    step_time = data.get("step_time") if isinstance(data.get("step_time"), Mapping) else {}
    assert isinstance(step_time, Mapping)
    tokens_per_step = tokens_per_s * (_number(step_time.get("median_s")) or med)
    return tflops, tuple(tokens_per_step / t / devices for t in times if t > 0)


def _section(data: Mapping[str, object], key: str) -> Mapping[str, object]:
    """A JSON object inside the record (empty when absent or not an object)."""
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def summary_from_record(data: Mapping[str, object], origin: str) -> RunSummary:
    """A pipecheck result (as the JSON object) as a RunSummary.

    Only the keys every run kind shares are read: ``steps``, ``env``, ``config`` and,
    when present, ``throughput``, ``compile``, ``step_time`` and ``warnings``."""
    if not isinstance(data, Mapping) or "kind" not in data or "format_version" not in data:
        raise ResultFormatError(f"{origin} is not a pipecheck result (no kind/format_version)")
    data = upgrade(data, origin)
    kind = str(data["kind"])
    if kind == ImportedRun.KIND:
        try:
            imported = ImportedRun.from_dict(data)
        except ResultFormatError as e:
            raise ResultFormatError(f"{origin}: {e}") from None
        return summary_from_imported(imported, origin)
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, Mapping) or not raw_steps.get("n"):
        raise ResultFormatError(
            f"{origin} holds a {kind!r} result without per-step times ('steps'); "
            "diff compares training runs (synthetic, compare, monitor, imported)"
        )
    steps = _steps_of(raw_steps, origin)
    env, config = _section(data, "env"), _section(data, "config")
    throughput, compile_info = _section(data, "throughput"), _section(data, "compile")

    is_steady = steady_mask(steps)
    times = steps.column("time_s")[is_steady].tolist()
    step_time = Distribution.of(times)
    med = step_time.summary.median
    anomalies = _anomalies_of(data, steps, origin)

    tflops, tokens = _rates_per_device(data, env, throughput, times, med)
    warnings = data.get("warnings")
    if isinstance(warnings, list):
        run_warnings = tuple(str(w) for w in warnings)
    else:
        run_warnings = tuple(stats.quality_warnings(step_time.summary))
    first = _number(compile_info.get("first_step_s"))
    other_cores, host_cores = _load_of(data, kind)
    return RunSummary(
        source=origin,
        kind=kind,
        env=dict(env),
        config=dict(config),
        steps=steps,
        step_time=step_time,
        mean_all_s=float(np.mean(steps.column("time_s"))),
        first_step_s=first if first is not None else steps[0].time_s,
        params=_number(data.get("params")),
        final_loss=_final_loss(steps),
        tflops_per_s_per_device=tflops,
        tokens_per_s_per_device=tokens,
        memory_compiled_bytes=_number(throughput.get("peak_memory_bytes")),
        anomalies=tuple(anomalies),
        warnings=run_warnings,
        incomplete=_run_end(data, origin),
        total_steps=total if isinstance(total := data.get("total_steps"), int) else None,
        other_cores=other_cores,
        host_cores=host_cores,
    )


def _load_of(data: Mapping[str, object], kind: str) -> tuple[float | None, int | None]:
    """``other_cores`` and ``host_cores`` of a record's ``machine_load``: the phase its steps
    were timed in (synthetic: ``target``; compare: ``real``); None when it has none, or when
    that phase is shorter than ``MIN_PHASE_WALL_S`` (its reading says nothing of the load)."""
    load = _section(data, "machine_load")
    phase = _section(load, "real" if kind == "compare" else "target")
    wall, other = _number(phase.get("wall_s")), _number(phase.get("other_cpu_s"))
    cores = load.get("cores")
    if (wall is None or wall < MIN_PHASE_WALL_S or other is None
            or not isinstance(cores, int)):
        return None, None
    return max(0.0, other) / wall, cores


def _compile_step_s(run: ImportedRun) -> float | None:
    """The first step's time when the log shows it compiling (not for an excerpt)."""
    if not len(run.steps) or not run.anomalies:
        return None
    first = run.anomalies[0]
    ok = first.step == run.steps[0].step and first.cause == anomalies.CAUSE_COMPILATION
    return first.time_s if ok else None


def imported_final_loss(run: ImportedRun) -> float | None:
    """The last loss the log printed, NaN included: NaN when the loss turned NaN or
    infinite after the last finite one."""
    losses = run.steps.column("loss")
    finite = np.flatnonzero(np.isfinite(losses))
    bad_from = run.nonfinite_loss_from
    if bad_from is not None and (not finite.size
                                 or bad_from > int(run.steps.column("step")[finite[-1]])):
        return math.nan
    return float(losses[finite[-1]]) if finite.size else None


def _run_end(data: Mapping[str, object], origin: str) -> RunEnd | None:
    """How a Monitor run that did not finish ended (its ``incomplete``), or None."""
    raw = data.get("incomplete")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):  # as from_dict says it
        raise ResultFormatError(f"{origin}: incomplete: expected an object for RunEnd, got "
                                f"{type(raw).__name__}")
    try:
        return RunEnd.from_dict(raw)
    except ResultFormatError as e:
        raise ResultFormatError(f"{origin}: incomplete: {e}") from None


def summary_from_imported(run: ImportedRun, origin: str | None = None) -> RunSummary:
    """A parsed MaxText log as a RunSummary."""
    is_steady = run.steady_mask
    mem = run.memory
    steps = run.steps.as_rows_of(StepRecord)

    def steady_column(name: str) -> tuple[float, ...]:
        values = run.steps.column(name)[is_steady]
        return float_column(values[~np.isnan(values)])

    return RunSummary(
        source=origin or run.source,
        kind=run.kind,
        env=dict(run.env),
        config=dict(run.config),
        steps=steps,
        step_time=run.step_time,
        mean_all_s=run.mean_all_s,
        first_step_s=_compile_step_s(run),
        params=run.params,
        final_loss=imported_final_loss(run),
        tflops_per_s_per_device=steady_column("tflops_per_s_per_device"),
        tokens_per_s_per_device=steady_column("tokens_per_s_per_device"),
        memory_compiled_bytes=(mem.compiled_total_gb * 1e9
                               if mem.compiled_total_gb is not None else None),
        memory_in_use_bytes=(mem.device_in_use_gb * 2**30
                             if mem.device_in_use_gb is not None else None),
        anomalies=run.anomalies,
        events=run.events,
        level_shifts=run.level_shifts,
        warnings=run.warnings,
        wall_time=run.wall_time,
    )


# --- comparing ---------------------------------------------------------------------------


def _median(xs: Sequence[float]) -> float | None:
    return float(np.median(xs)) if len(xs) else None


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def _plain_row(name: str, unit: str, a: float | None, b: float | None,
               relative: bool = True) -> DiffRow:
    a, b = _finite(a), _finite(b)
    diff = b - a if a is not None and b is not None else None
    rel = diff / a if relative and diff is not None and a else None
    return DiffRow(name, unit, a, b, diff, rel)


def _loss_row(a: float | None, b: float | None) -> DiffRow:
    """The final losses, a NaN kept as NaN (a run whose loss diverged must say so)."""
    row = _plain_row("final loss", "loss", a, b)
    return dataclasses.replace(row, a=a, b=b)


def _tested_row(name: str, unit: str, xa: Sequence[float], xb: Sequence[float],
                confidence: float, progress: Progress = NO_PROGRESS) -> DiffRow:
    if len(xa) < 2 or len(xb) < 2:
        return _plain_row(name, unit, _median(xa), _median(xb))
    d = stats.median_difference(xa, xb, confidence, progress=progress, what=name)
    return DiffRow(
        name, unit, d.median_a, d.median_b, d.diff, _finite(d.relative),
        "significant" if d.significant else "not significant",
        _finite(d.p_value), _finite(d.ci_low), _finite(d.ci_high),
    )


def _differences(a: Mapping[str, object], b: Mapping[str, object],
                 keys: Sequence[str]) -> list[str]:
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:MAX_LISTED_DIFFERENCES])
    more = len(items) - MAX_LISTED_DIFFERENCES
    return shown + (f"; and {more} more" if more > 0 else "")


def comparison_warnings(a: RunSummary, b: RunSummary) -> list[str]:
    """Environment and config differences, and each run's own quality warnings."""
    out = []
    if a.kind != b.kind:
        out.append(f"A is a {a.description} and B a {b.description}: their step times are "
                   "measured differently (pipecheck: between loss syncs; MaxText: host time "
                   "between step completions)")
    env_keys = [k for k in ENV_KEYS_THAT_MATTER + ("host", "cpu_count")
                if a.env.get(k) is not None and b.env.get(k) is not None]
    env_diff = env_differences({k: a.env[k] for k in env_keys}, {k: b.env[k] for k in env_keys})
    if env_diff:
        out.append(f"the environments differ: {_listed(env_diff)}")
    if a.kind == b.kind:
        keys = sorted(set(a.config) | set(b.config))
    else:
        keys = sorted(set(a.config) & set(b.config))
    cfg_diff = _differences(a.config, b.config, keys)
    if cfg_diff:
        out.append(f"the configs differ: {_listed(cfg_diff)}")
    out += [f"A: {w}" for w in a.warnings]
    out += [f"B: {w}" for w in b.warnings]
    return out


def inconclusive_verdict(reasons: Sequence[NotComparable]) -> str:
    """The verdict when B cannot be judged against A: each reason, and what to do."""
    lines = [f"step time: inconclusive; A and B are not comparable ({len(reasons)} "
             f"reason{'s' if len(reasons) > 1 else ''}), so no difference is judged:"]
    lines += [f"  - {r.describe()}" for r in reasons]
    return "\n".join(lines)


def outcome_of(row: DiffRow, reasons: Sequence[NotComparable]) -> str:
    """The verdict word (``OUTCOMES``)."""
    if reasons or not row.significance:
        return "inconclusive"
    return row.significance


def below_min_change(row: DiffRow, min_change: float) -> DiffRow:
    """Pure: ``row`` as the verdict judges it: a significant change smaller than
    ``min_change`` of A's median is not significant."""
    small = row.relative is not None and abs(row.relative) < min_change
    if row.significance == "significant" and small:
        return dataclasses.replace(row, significance="not significant")
    return row


def step_time_verdict(row: DiffRow, confidence: float, min_change: float = 0.0) -> str:
    """One plain sentence on the steady-state median step time (``row``: as the steps'
    test found it; a change under ``min_change`` is judged not significant)."""
    if not row.significance:
        return ("step time: not compared; each run needs at least 2 steady-state steps "
                f"(A has {'some' if row.a is not None else 'none'}, "
                f"B has {'some' if row.b is not None else 'none'})")
    assert row.diff is not None and row.a is not None and row.b is not None
    ci = (f"{confidence:.0%} CI of the difference {ms(row.ci_low or 0.0, signed=True)} .. "
          f"{ms(row.ci_high or 0.0, signed=True)}")
    rel = f"{row.relative:+.1%}" if row.relative is not None else "?"
    if row.significance == "significant" and abs(row.relative or 0.0) < min_change:
        return (f"step time: not significant. The steady-state medians differ by "
                f"{ms(row.diff, signed=True)} ({rel}), {_under_the_floor(min_change)}: the "
                f"steps' own test finds it ({ci}; Mann-Whitney {p_value(row.p_value)}), but "
                f"two runs of one workload differ that much without a change; {EQUALLY_FAST}"
                ", or repeat both runs to see whether it holds")
    if row.significance == "significant":
        return _significant(row.relative or 0.0, "", (
            f"steady-state median {ms(row.a)} -> {ms(row.b)}, {ms(row.diff, signed=True)}; "
            f"{ci}; Mann-Whitney {p_value(row.p_value)}"))
    reasons = []
    lo, hi = row.ci_low, row.ci_high
    if lo is not None and hi is not None and lo <= 0 <= hi:
        reasons.append(f"the {ci} includes zero")
    alpha = 1.0 - confidence
    if row.p_value is not None and row.p_value >= alpha:
        reasons.append(f"Mann-Whitney {p_value(row.p_value)} >= {alpha:.2g}")
    return (f"step time: not significant. The steady-state medians differ by "
            f"{ms(row.diff, signed=True)} ({rel}), but {' and '.join(reasons)}; "
            f"{EQUALLY_FAST}")


EQUALLY_FAST = "treat A and B as equally fast"
"""What a step-time change that is not significant tells the user to take it for."""


def _under_the_floor(min_change: float) -> str:
    return f"under the {min_change:.0%} diff judges (--min-change)"


def _significant(relative: float, over: str, evidence: str) -> str:
    """The sentence of a significant step-time change: B's change against A, ``over``
    which runs (empty for one a side), then the evidence in brackets."""
    way = "longer" if relative > 0 else "less time"
    return (f"step time: B takes {abs(relative):.1%} {way} per step than A: significant"
            f"{' ' + over if over else ''} ({evidence})")


def _version(env: Mapping[str, object], key: str) -> str | None:
    v = env.get(key)
    return None if v is None else str(v)


def last_level(run: RunSummary, label: str) -> tuple[Sequence[float], str | None]:
    """The steady step times the median is compared on: all of them, or for a run whose
    steady state changed level, those of the level it ended at (like with like: two runs
    that both settle after a profiler window are compared after it), and a note saying so."""
    if not run.level_shifts:
        return run.step_time.samples_s, None
    shift = run.level_shifts[-1]
    listed = np.fromiter((x.step for x in run.anomalies), np.int64, len(run.anomalies))
    numbers = run.steps.column("step")
    keep = ~np.isin(numbers, listed) & (numbers >= shift.step)
    samples = float_column(run.steps.column("time_s")[keep])
    return samples, (f"{label}'s steady state changed level at step {shift.step} (median "
                     f"{ms(shift.before_median_s)} before, {ms(shift.after_median_s)} from it "
                     f"on): its median is compared over its {len(samples)} steady steps from "
                     f"step {shift.step} on")


def _median_row(xa: Sequence[float], xb: Sequence[float], confidence: float,
                progress: Progress, tested: bool) -> DiffRow:
    """The steady-state median row: the steps' own test, or (not ``tested``) the medians."""
    if tested:
        return _tested_row("step time median", "s", xa, xb, confidence, progress)
    return _plain_row("step time median", "s", _median(xa), _median(xb))


def diff_runs(a: RunSummary, b: RunSummary, confidence: float = DEFAULT_CONFIDENCE,
              progress: Progress = NO_PROGRESS, encoder: ArrayEncoder = SERIAL,
              allow: Sequence[str] = (), min_change: float = MIN_CHANGE,
              median_test: bool = True) -> DiffResult:
    """Compare two runs: rows with B - A, relative change and significance, plus warnings.
    ``progress`` hears of each bootstrap (seconds each on million-step runs). ``encoder``:
    the one the record will be written with, given the runs' step columns first (a
    ``pipecheck.encoding.ParallelEncoder`` compresses them on another thread while they are
    compared). ``allow``: rules or config keys whose difference is the change under test
    (``analysis.comparable``). ``min_change``: the smallest relative change of the median
    called significant (``MIN_CHANGE``). ``median_test``: False skips the steps' median
    bootstrap, for ``diff_sides``, which tests the runs' medians instead."""
    encoder.compress_ahead([*a.per_step_arrays(), *b.per_step_arrays()])
    sa, sb = a.step_time.summary, b.step_time.summary
    (xa, note_a), (xb, note_b) = last_level(a, "A"), last_level(b, "B")
    tested = _median_row(xa, xb, confidence, progress, median_test)
    median_row = below_min_change(tested, min_change)
    rows = (
        _plain_row("parameters", "count", a.params, b.params),
        _loss_row(a.final_loss, b.final_loss),
        _tested_row("TFLOP/s per device", "TFLOP/s", a.tflops_per_s_per_device,
                    b.tflops_per_s_per_device, confidence, progress),
        _tested_row("tokens/s per device", "tokens/s", a.tokens_per_s_per_device,
                    b.tokens_per_s_per_device, confidence, progress),
        median_row,
        _plain_row("step time p90", "s", sa.p90 if sa.n else None, sb.p90 if sb.n else None),
        _plain_row("step time mean", "s", sa.mean if sa.n else None,
                   sb.mean if sb.n else None),
        _plain_row("step time mean, all steps", "s", a.mean_all_s, b.mean_all_s),
        _plain_row("mean inflated by anomalies", "fraction", a.mean_inflation,
                   b.mean_inflation, relative=False),
        _plain_row("steady-state steps", "steps", sa.n, sb.n),
        _plain_row("anomalous steps", "steps", len(a.anomalies), len(b.anomalies),
                   relative=False),
        _plain_row("first step (compile)", "s", a.first_step_s, b.first_step_s),
        _plain_row("memory (compiled step)", "bytes", a.memory_compiled_bytes,
                   b.memory_compiled_bytes),
        _plain_row("memory in use (device)", "bytes", a.memory_in_use_bytes,
                   b.memory_in_use_bytes),
    )
    reasons = not_comparable(a, b, allow)
    blind = unchecked(a, b, allow)
    versions = tuple(VersionRow(k, _version(a.env, k), _version(b.env, k)) for k in VERSION_KEYS
                     if a.env.get(k) is not None or b.env.get(k) is not None)
    return DiffResult(
        a=a,
        b=b,
        rows=rows,
        versions=versions,
        verdict=(inconclusive_verdict(reasons) if reasons
                 else "\n".join(filter(None, (step_time_verdict(tested, confidence,
                                                                 min_change),
                                               unchecked_line(blind))))),
        warnings=tuple([n for n in (note_a, note_b) if n] + comparison_warnings(a, b)),
        confidence=confidence,
        outcome=outcome_of(median_row, reasons),
        not_comparable=reasons,
        min_change=min_change,
        unchecked=blind,
    )


# --- several runs a side -----------------------------------------------------------------


def run_median(run: RunSummary) -> float:
    """A run's steady-state median as the verdict compares it (``last_level``); NaN for a
    run without steady steps."""
    samples, _ = last_level(run, "")
    return float(np.median(samples)) if len(samples) else math.nan


def between_row(between: BetweenRuns) -> DiffRow:
    """The step-time median row of several runs a side: the geometric means of each side's
    run medians, and the test over them (the interval in seconds of A's)."""
    a = between_runs.geometric_mean(between.runs_a)
    b = between_runs.geometric_mean(between.runs_b)
    if not between.significance:
        return _plain_row("step time median", "s", a, b)
    lo, hi = between.ci_low, between.ci_high
    return DiffRow("step time median", "s", a, b, b - a, between.relative,
                   between.significance, between.p_value,
                   None if lo is None else lo * a, None if hi is None else hi * a)


def _runs_said(between: BetweenRuns) -> str:
    na, nb = len(between.runs_a), len(between.runs_b)
    said = f"over {na} run{'s' if na > 1 else ''} of A and {nb} of B"
    if between.spread_from in ("A", "B"):
        side = between.spread_from
        count = na if side == "A" else nb
        said += f" (the between-run spread from {side}'s {count} runs, taken for both)"
    return said


def runs_verdict(between: BetweenRuns, row: DiffRow, confidence: float,
                 min_change: float) -> str:
    """The step-time sentence when a side holds several runs (``row``: ``between_row``)."""
    if not between.significance:
        return ("step time: not compared; every run needs steady-state steps for its "
                "median")
    assert row.a is not None and row.b is not None and row.diff is not None
    ci = (f"{confidence:.0%} CI of the change {between.ci_low or 0.0:+.1%} .. "
          f"{between.ci_high or 0.0:+.1%}")
    test = (f"{'Welch' if between.spread_from == 'A and B' else 'Student'}'s t on the logs "
            f"of the runs' medians {p_value(between.p_value)}")
    rel = between.relative or 0.0
    medians = (f"geometric mean of the runs' steady-state medians {ms(row.a)} -> "
               f"{ms(row.b)}, {ms(row.diff, signed=True)}")
    if between.significance == "significant" and abs(rel) < min_change:
        return (f"step time: not significant. {_runs_said(between)}, the runs' medians "
                f"differ by {rel:+.1%}, {_under_the_floor(min_change)}: the test over the "
                f"runs finds it ({ci}; {test})")
    if between.significance == "significant":
        return _significant(rel, _runs_said(between), f"{medians}; {ci}; {test}")
    alpha = 1.0 - confidence
    return (f"step time: not significant {_runs_said(between)}. The runs' medians differ "
            f"by {rel:+.1%} ({medians}), but the {ci} includes zero ({test} >= "
            f"{alpha:.2g}); {EQUALLY_FAST}, or add runs to each side to narrow the interval")


def diff_sides(side_a: Sequence[RunSummary], side_b: Sequence[RunSummary],
               confidence: float = DEFAULT_CONFIDENCE, progress: Progress = NO_PROGRESS,
               encoder: ArrayEncoder = SERIAL, allow: Sequence[str] = (),
               min_change: float | None = None) -> DiffResult:
    """Compare the runs of A with those of B (each side one run or several repeats).

    One run a side is ``diff_runs``. With several on a side, the step-time verdict is the
    test over the runs' steady-state medians (``between_runs.compare_runs``); every other
    row, and the record's ``a`` and ``b``, are each side's first run. Each side's runs are
    checked against its first (``comparable.within_side``), A's first against B's first as
    ``diff_runs`` does. ``min_change``: ``default_min_change`` unless given."""
    if not side_a or not side_b:
        raise ValueError("diff_sides needs a run on each side")
    floor = (default_min_change(len(side_a), len(side_b)) if min_change is None
             else min_change)
    several = len(side_a) > 1 or len(side_b) > 1
    first = diff_runs(side_a[0], side_b[0], confidence, progress, encoder, allow, floor,
                      median_test=not several)
    if not several:
        return first
    between = between_runs.compare_runs(
        [r.source for r in side_a], [run_median(r) for r in side_a],
        [r.source for r in side_b], [run_median(r) for r in side_b], confidence)
    tested = between_row(between)
    row = below_min_change(tested, floor)
    reasons = (first.not_comparable + within_side(side_a, "A", allow)
               + within_side(side_b, "B", allow))
    blind = (first.unchecked + side_unchecked(side_a, "A", allow)
             + side_unchecked(side_b, "B", allow))
    verdict = (inconclusive_verdict(reasons) if reasons else "\n".join(filter(None, (
        runs_verdict(between, tested, confidence, floor), unchecked_line(blind)))))
    return dataclasses.replace(
        first, rows=tuple(row if r.name == "step time median" else r for r in first.rows),
        verdict=verdict, outcome=outcome_of(row, reasons), not_comparable=reasons,
        between_runs=between, unchecked=blind)
