"""Pure: the span log read, resolved and folded into steps.

A ``SpanRecorder`` (``spans.py``) logs a span's start as its clock reading and its end as an
*end marker* (a tagged NaN holding the name's number, ``end_marker``) with the end's clock
reading apart; a fold reads the log (``read_log``), matches each end with its start
(``resolve_spans``: from the order in which spans started and ended, so ties of an injected
clock cannot confuse it) and sums the spans of each step (``fold_intervals``, vectorized;
``close_interval`` is the rule, one interval at a time, and the reference the fold is tested
against).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from pipecheck.records.common import StepRecord
from pipecheck.records.events import Span
from pipecheck.records.steps import StepTable, _Tags

DETACHED_KINDS = ("gc",)
"""Spans that interrupt whatever is running (a garbage collection): counted under their own
name at any depth, and taken out of the top-level span they interrupted."""


_MARKER_TAG = 0x7FFD_2C5A
"""The high 32 bits of every end marker: a quiet NaN (sign 0, exponent all ones, the quiet
bit set) with a payload no arithmetic makes (a NaN from arithmetic has none, or carries one
it was given); the low 32 bits hold the name's number."""

_MARKER_ID_MASK = 0xFFFF_FFFF


def end_marker(name_id: int) -> float:
    """The float logged for an end of span name ``name_id``: a NaN tagged ``_MARKER_TAG``,
    which no clock reads."""
    if not 0 <= name_id <= _MARKER_ID_MASK:
        raise ValueError(f"span name number {name_id} out of range")
    return float(np.uint64((_MARKER_TAG << 32) | name_id).view(np.float64))


def read_log(log: Sequence[float] | np.ndarray,
             ends: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure: the starts and ends of a span log (starts' clock readings and ends' markers, in
    the order they happened) and its ends' clock readings (those past its last marker are
    not read), as ``resolve_spans`` takes them: the starts in order, and a row (end, name
    id, how many had started) for each end."""
    values = np.asarray(log, np.float64)
    n = len(values)
    bits = values.view(np.uint64)
    is_end = (bits >> np.uint64(32)) == _MARKER_TAG  # a clock that read NaN logs a start
    if n % 2 == 0 and is_end[1::2].all() and not is_end[::2].any():
        # each span ended before the next started (the usual log): starts and ends alternate
        at = np.arange(1, n, 2)
        ids = (bits[1::2] & _MARKER_ID_MASK).astype(np.int64)
        starts = values[::2]
    else:
        at = np.flatnonzero(is_end)
        ids = (bits[at] & _MARKER_ID_MASK).astype(np.int64)
        starts = values[~is_end]
    k = len(at)
    exits = np.empty((k, 3))
    exits[:, 0] = np.asarray(ends, np.float64)[:k]
    exits[:, 1] = ids
    exits[:, 2] = at - np.arange(k)  # the starts before each end
    return starts, exits


def resolve_spans(enters: np.ndarray, exits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure: spans from the log of their starts and ends. ``enters`` holds the starts in
    the order spans started; ``exits`` rows of (end, name id, how many had started), in the
    order they ended. Each end closes the last span started before it and not yet ended.

    Returns rows of (name id, start, end, depth) in the order the spans ended (depth: how
    many spans were open when it started) and, for each start, whether its span is still
    open."""
    m, k = len(enters), len(exits)
    rows = np.empty((k, 4))
    if k:
        rows[:, 0] = exits[:, 1]
        rows[:, 2] = exits[:, 0]
    started = exits[:, 2].astype(np.int64)
    first = int(started[0]) - 1 if k else 0
    if k and first >= 0 and first + k <= m and np.array_equal(
            started, np.arange(first + 1, first + k + 1)):
        # each span ended before the next started, inside the ``first`` ones still open
        opened = np.arange(first, first + k)
        depth = np.full(k, float(first))
    else:
        opened, depth = _match_nested(m, started)
    still_open = np.ones(m, bool)
    still_open[opened[opened >= 0]] = False
    closed = opened >= 0
    rows[:, 1] = np.where(closed, enters[np.maximum(opened, 0)] if m else 0.0, rows[:, 2])
    rows[:, 3] = depth
    return rows, still_open


def _match_nested(m: int, started: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each end, the start it closes (-1: none) and the depth, where spans nest: the
    starts and ends in the order they happened, grouped by the depth each opens at or
    closes to; within a depth they alternate start, end, so each end closes the start just
    before it."""
    k = len(started)
    keys = np.concatenate([2 * np.arange(m), 2 * started - 1])  # an end: after its starts
    order = np.argsort(keys, kind="stable")
    is_end = order >= m
    level = np.cumsum(np.where(is_end, -1, 1))
    at = np.where(is_end, level, level - 1)
    if k and at.min() < 0:  # an end with no start before it: a malformed log
        return _match_by_stack(m, started)
    by_depth = np.argsort(at, kind="stable")
    ends = np.flatnonzero(is_end[by_depth])
    before = ends - 1
    if np.any(before < 0) or np.any(is_end[by_depth][before]):  # pragma: no cover - proven
        return _match_by_stack(m, started)                     # unreachable by the levels
    opened = np.full(k, -1, np.int64)
    depth = np.zeros(k)
    end_ids = order[by_depth[ends]] - m
    opened[end_ids] = order[by_depth[before]]
    depth[end_ids] = at[by_depth[ends]]
    return opened, depth


def _match_by_stack(m: int, started: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_match_nested`` one event at a time, for a malformed log: an end with no open
    start closes nothing (its span is logged with no length)."""
    opened = np.full(len(started), -1, np.int64)
    depth = np.zeros(len(started))
    stack: list[int] = []
    nxt = 0
    for i, n in enumerate(started.tolist()):
        while nxt < min(n, m):
            stack.append(nxt)
            nxt += 1
        if stack:
            opened[i] = stack.pop()
            depth[i] = len(stack)
    return opened, depth


def spans_by_step(marks: np.ndarray, timed: np.ndarray, timed_before: np.ndarray,
              other: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure: the spans of a fold in the order they ended, each step's after the last's,
    and the marks as ``fold_intervals`` takes them (clock, loss, spans before it), from the
    spans timed by the recorder (``timed_before``: how many ended before each mark) and
    the spans timed elsewhere (``other``; the marks' third column counts them)."""
    if not len(other):  # they end in the order they were logged
        return timed, np.column_stack([marks[:, 0], marks[:, 1], timed_before])
    steps = np.concatenate([
        np.searchsorted(timed_before, np.arange(len(timed)), side="right"),
        np.searchsorted(marks[:, 2], np.arange(len(other)), side="right")])
    spans = np.concatenate([timed, other])
    order = np.lexsort((spans[:, 2], steps))
    before = np.searchsorted(steps[order], np.arange(len(marks)), side="right")
    return spans[order], np.column_stack([marks[:, 0], marks[:, 1], before])


def _step_of_spans(before: np.ndarray, count: int) -> np.ndarray:
    """Pure: the step of each of ``count`` spans, in order, from the number of spans that
    ended before each step's mark (``before``: non-decreasing, unless a signal handler folded
    between a mark's count and its append; then the step is searched, as always before)."""
    per_step = np.diff(before, prepend=0)
    if len(before) and before[-1] == count and per_step.min() >= 0:
        return np.repeat(np.arange(len(before)), per_step)
    return np.searchsorted(before, np.arange(count), side="right")


def fold_intervals(
    first_step: int,
    start: float,
    marks: np.ndarray,
    spans: np.ndarray,
    tags: list[tuple[str, float, int]],
    names: Sequence[str],
) -> StepTable[StepRecord]:
    """Pure: the steps closed by ``marks`` (rows of clock, loss or NaN, spans before it),
    the first numbered ``first_step`` and opened at ``start``, from the ``spans`` (rows of
    name id, start, end, depth) and ``tags`` ((name, clock, marks before it)) logged in them.

    Every step follows ``close_interval``; an interval whose spans are all at depth 0, not
    detached and inside it is computed with numpy, the others by ``close_interval``."""
    n = len(marks)
    ends = marks[:, 0]
    starts = np.concatenate([[start], ends[:-1]])
    step_of = _step_of_spans(marks[:, 2].astype(np.int64), len(spans))
    ids = spans[:, 0].astype(np.int64)
    columns, seen = _sum_spans_by_step(n, step_of, ids, spans, len(names))
    step_tags = _tags_by_step(tags, first_step + 1, n)
    for row in _steps_for_the_rule(starts, ends, step_of, ids, spans, names).tolist():
        inside = step_of == row
        record = close_interval(
            first_step + row, float(starts[row]), float(ends[row]),
            [Span(names[int(i)], a, b, int(d)) for i, a, b, d in spans[inside].tolist()],
            [(t, 0.0) for t in step_tags.get(row, [])], None)
        columns[row] = np.nan
        for name, value in record.spans.items():
            if name != "other":
                columns[row, names.index(name)] = value
    time_s = ends - starts
    maps = {names[j]: columns[:, j] for j in range(len(names)) if seen[:, j].any()}
    maps["other"] = np.maximum(0.0, time_s - np.nansum(columns, axis=1))
    return StepTable(
        StepRecord, n,
        {"step": np.arange(first_step, first_step + n, dtype=np.int64),
         "time_s": time_s.astype(np.float64), "loss": marks[:, 1].copy()},
        {"tags": _tag_table(step_tags)},
        {"spans": maps})


def _steps_for_the_rule(starts: np.ndarray, ends: np.ndarray, step_of: np.ndarray,
                        ids: np.ndarray, spans: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The steps (rows, ascending) that ``close_interval`` folds, not numpy: those with a
    span nested, detached, or not wholly inside the step."""
    s0, s1, depth = spans[:, 1], spans[:, 2], spans[:, 3]
    odd = (depth != 0) | (s0 < starts[step_of]) | (s1 > ends[step_of])
    for i, name in enumerate(names):
        if name in DETACHED_KINDS:
            odd |= ids == i
    return np.unique(step_of[odd]) if odd.any() else np.zeros(0, np.int64)


def _sum_spans_by_step(n: int, step_of: np.ndarray, ids: np.ndarray, spans: np.ndarray,
                       k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``n`` steps' total time in each of ``k`` span names (NaN: none ended in it),
    and whether any did, as two (n, k) arrays."""
    flat = step_of * k + ids
    sums = np.bincount(flat, weights=spans[:, 2] - spans[:, 1], minlength=n * k).reshape(n, k)
    seen = np.bincount(flat, minlength=n * k).reshape(n, k) > 0
    return np.where(seen, sums, np.nan), seen


def _tags_by_step(tags: list[tuple[str, float, int]], first_mark: int,
                  n: int) -> dict[int, list[str]]:
    """The names tagged in each of the ``n`` steps (by row; each once, in the order first
    logged), from tags logged as (name, clock, marks before it); the first step's mark is
    number ``first_mark``."""
    step_tags: dict[int, list[str]] = {}
    for name, _, before in tags:
        row = before - first_mark
        if 0 <= row < n:
            got = step_tags.setdefault(row, [])
            if name not in got:
                got.append(name)
    return step_tags


def _tag_table(step_tags: dict[int, list[str]]) -> _Tags:
    """The StepTable's tags column from the names tagged in each step (by row)."""
    tag_names: list[str] = []
    tag_rows, tag_ids = [], []
    for row in sorted(step_tags):
        for t in step_tags[row]:
            if t not in tag_names:
                tag_names.append(t)
            tag_rows.append(row)
            tag_ids.append(tag_names.index(t))
    return _Tags(tuple(tag_names), np.asarray(tag_rows, np.int64), np.asarray(tag_ids, np.int32))


def close_interval(
    step: int,
    start: float,
    end: float,
    spans: list[Span],
    tags: list[tuple[str, float]],
    loss: float | None,
) -> StepRecord:
    """Pure: one interval's StepRecord from the spans and tags that ended inside it.

    Only top-level spans (depth 0) are summed, so nested spans do not double count,
    except detached ones (``gc``): they count at any depth and are taken out of the
    top-level span they interrupted. A span that began before ``start`` is clipped
    to the interval.
    """
    totals: dict[str, float] = {}
    nested_detached: list[tuple[Span, float]] = []
    for s in spans:
        dur = max(0.0, min(s.end, end) - max(s.start, start))
        if s.name in DETACHED_KINDS:
            if s.depth != 0:
                nested_detached.append((s, dur))
        elif s.depth != 0:
            continue
        totals[s.name] = totals.get(s.name, 0.0) + dur
    for d, dur in nested_detached:
        for p in spans:
            if (p.depth == 0 and p.name not in DETACHED_KINDS
                    and p.start <= d.start and d.end <= p.end):
                totals[p.name] = max(0.0, totals[p.name] - dur)
                break
    seen: list[str] = []
    for name, _ in tags:
        if name not in seen:
            seen.append(name)
    time_s = end - start
    totals["other"] = max(0.0, time_s - sum(totals.values()))
    return StepRecord(step=step, time_s=time_s, tags=tuple(seen), spans=totals, loss=loss)
