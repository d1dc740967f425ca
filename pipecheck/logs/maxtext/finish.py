"""A pass's read finished (``finish``): every header on one clock (timestamp lines moved to
it, New Year's Eves crossed), bare step lines timed by the next header, events timed and
anchored, and the readable steps put in step order into the ``ParsedLog``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pipecheck.analysis.logs.maxtext import ParsedLog
from pipecheck.logs.maxtext.clock import new_years
from pipecheck.logs.maxtext.columns import StepColumns
from pipecheck.logs.maxtext.reader import Reader
from pipecheck.records.imported import LogEvent, LogStep
from pipecheck.records.steps import StepTable


@dataclasses.dataclass
class _Headers:
    """Every absl header of a log in two parts, each in line order: the step lines' and the
    other lines'; times are seconds since the first header in line order."""

    step_line: np.ndarray
    step_at: np.ndarray
    step_row: np.ndarray | None
    """Each step header's step line (None: every step line has one, in the same order)."""
    other_line: np.ndarray
    other_at: np.ndarray
    origin: tuple[int, float]
    """The first header's day and seconds."""
    raw: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    """The days and seconds of the step lines (by row) and of the other lines' headers."""

    @classmethod
    def of(cls, r: Reader, read: StepColumns, step_line: np.ndarray) -> _Headers:
        own = read.own
        every = bool(own.all())
        rows = None if every else np.flatnonzero(own)
        lines, days, secs = ((step_line, read.day, read.secs) if rows is None
                             else (step_line[rows], read.day[rows], read.secs[rows]))
        oline = np.asarray(r.header_line, dtype=np.int64)
        odays = np.asarray(r.header_day, dtype=np.int64)
        osecs = np.asarray(r.header_s, dtype=np.float64)
        days, odays = new_years(lines, days, oline, odays)
        all_days = days if rows is None else read.day.copy()
        if rows is not None:
            all_days[rows] = days
        if lines.size and (not oline.size or lines[0] < oline[0]):
            d0, s0 = int(days[0]), float(secs[0])
        elif oline.size:
            d0, s0 = int(odays[0]), float(osecs[0])
        else:
            d0, s0 = 0, 0.0
        return cls(lines, np.round((days - d0) * 86400.0 + (secs - s0), 6), rows,
                   oline, np.round((odays - d0) * 86400.0 + (osecs - s0), 6), (d0, s0),
                   (all_days, read.secs, odays, osecs))

    def next_at(self, lines: np.ndarray) -> np.ndarray:
        """The time of the first header at or after each of ``lines`` (NaN: none)."""
        i1 = np.searchsorted(self.step_line, lines, side="left")
        i2 = np.searchsorted(self.other_line, lines, side="left")
        l1 = np.where(i1 < self.step_line.size,
                      self.step_line[np.minimum(i1, self.step_line.size - 1)]
                      if self.step_line.size else 0, np.iinfo(np.int64).max)
        l2 = np.where(i2 < self.other_line.size,
                      self.other_line[np.minimum(i2, self.other_line.size - 1)]
                      if self.other_line.size else 0, np.iinfo(np.int64).max)
        t1 = (self.step_at[np.minimum(i1, self.step_line.size - 1)] if self.step_line.size
              else np.full(lines.size, math.nan))
        t2 = (self.other_at[np.minimum(i2, self.other_line.size - 1)] if self.other_line.size
              else np.full(lines.size, math.nan))
        return np.where(np.minimum(l1, l2) == np.iinfo(np.int64).max, math.nan,
                        np.where(l1 <= l2, t1, t2))

    def last_before_each(self, lines: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last header at or before each of ``lines``: its line (-1: none), its time
        not yet rounded (NaN: none), and where it is (a step row, or an index among the other
        lines' headers; -1 where it is not of that kind)."""
        def at(values: np.ndarray, idx: np.ndarray, fill: float = -1) -> np.ndarray:
            return (values[np.maximum(idx, 0)] if values.size
                    else np.full(idx.size, fill, dtype=values.dtype))

        i1 = np.searchsorted(self.step_line, lines, side="right") - 1
        i2 = np.searchsorted(self.other_line, lines, side="right") - 1
        l1 = np.where(i1 >= 0, at(self.step_line, i1), -1)
        l2 = np.where(i2 >= 0, at(self.other_line, i2), -1)
        step = l1 > l2
        rows = i1 if self.step_row is None else at(self.step_row, i1)
        days, secs, odays, osecs = self.raw
        day = np.where(step, at(days, rows, 0), at(odays, i2, 0))
        sec = np.where(step, at(secs, rows, 0), at(osecs, i2, 0))
        d0, s0 = self.origin
        when = np.where((l1 < 0) & (l2 < 0), math.nan, (day - d0) * 86400.0 + (sec - s0))
        return (np.maximum(l1, l2), when, np.where(step, rows, -1),
                np.where(~step & (l2 >= 0), i2, -1))


def finish(r: Reader) -> None:
    """The step lines' numbers joined into ``r.p``'s steps, and the events made with their
    times (see ``Reader``)."""
    p = r.p
    p.start_seen = p.start_seen or r.started_by_config
    read = StepColumns.join(r.chunks)
    r.chunks = []
    step_line = (np.concatenate(r.chunk_lines) if r.chunk_lines
                 else np.zeros(0, dtype=np.int64))
    _stamp(r, read, step_line)
    headers = _Headers.of(r, read, step_line)
    # a step line's time: its own header's, or for a bare one the next header's
    if headers.step_row is None:
        line_at = headers.step_at
    else:
        line_at = np.full(step_line.size, math.nan)
        line_at[headers.step_row] = headers.step_at
        bare = np.flatnonzero(~read.own)
        line_at[bare] = headers.next_at(step_line[bare])
    p.events = _events(r, headers, read, step_line)
    times = np.concatenate([headers.step_at, headers.other_at])
    if times.size:
        p.first_at, p.last_at = float(times.min()), float(times.max())
    steps, take = _table(read.number, read.cols, read.metrics, step_line, p)
    p.steps, p.line_at = steps, line_at[take]
    p.has_loss, p.own_time = read.has_loss[take], read.own[take]


ZONE_STEP_S = 900
"""Time zones differ by whole quarters of an hour: the offset between a log viewer's
timestamps and the absl headers is rounded to it."""


def _stamp(r: Reader, read: StepColumns, step_line: np.ndarray) -> None:
    """Each line below a timestamp line (``STAMP``) takes its time as its own header's,
    unless it has an absl header: a step line in its row; any other line as a header of
    its own, which then times its events as their own header would. A viewer writes its
    timestamps in its own time zone: where the log has absl headers, the stamps above
    headed lines tell the offset (``_zone_offset``) and every stamp is moved by it; where
    none does, the stamps cannot be put on the headers' clock and are not used."""
    if not r.stamps:
        return
    lines = np.fromiter((line for line, *_ in r.stamps), np.int64, len(r.stamps))
    k = np.searchsorted(step_line, lines)
    found = k < step_line.size
    found[found] = step_line[k[found]] == lines[found]
    rows = np.where(found, k, -1).tolist()  # each stamped line's step row (-1: not a step)
    offset = _zone_offset(r, read, rows)
    if offset is None:
        return
    headed = set(r.header_line)
    added: list[tuple[int, int, float, str]] = []
    for (line, day, seconds, clock), row in zip(r.stamps, rows, strict=True):
        shifted = seconds + offset
        day, seconds = day + int(shifted // 86400), shifted % 86400
        if row >= 0:
            if not read.own[row]:
                read.own[row], read.day[row], read.secs[row] = True, day, seconds
                read.decimals[row], read.clocks[row] = -2, clock
        elif line not in headed:
            added.append((line, day, seconds, clock))
    if not added:
        return
    stamped = {line for line, *_ in added}
    for e in r.pending:
        if e.line in stamped:
            e.own_header = True
    merged = sorted([*zip(r.header_line, r.header_day, r.header_s, r.header_clock,
                          strict=True), *added], key=lambda row: row[0])
    r.header_line = [row[0] for row in merged]
    r.header_day = [row[1] for row in merged]
    r.header_s = [row[2] for row in merged]
    r.header_clock = [row[3] for row in merged]


def _zone_offset(r: Reader, read: StepColumns, rows: list[int]) -> float | None:
    """Seconds to add to the log's timestamp lines to put them on its absl headers' clock:
    0 in a log without absl headers; else the median of (header - stamp) over the stamps
    above headed lines, rounded to ``ZONE_STEP_S``; None where no stamp is above one.
    ``rows``: each stamped line's step row (-1: not a step line)."""
    others = dict(zip(r.header_line, zip(r.header_day, r.header_s, strict=True), strict=True))
    if not others and not read.own.any():
        return 0.0
    gaps = []
    for (line, day, seconds, _), row in zip(r.stamps, rows, strict=True):
        if row >= 0 and read.own[row]:
            head = (int(read.day[row]), float(read.secs[row]))
        elif line in others:
            head = others[line]
        else:
            continue
        gaps.append((head[0] - day) * 86400.0 + head[1] - seconds)
    if not gaps:
        return None
    return round(float(np.median(gaps)) / ZONE_STEP_S) * ZONE_STEP_S


def _events(r: Reader, headers: _Headers, read: StepColumns,
            step_line: np.ndarray) -> list[LogEvent]:
    """The pending events with their times (own header, or for checkpoint lines the last
    header at or before them) and anchors (the last readable step line before them),
    looked up for all of them at once."""
    if not r.pending:
        return []
    lines = np.fromiter((e.line for e in r.pending), np.int64, len(r.pending))
    found, when, rows, others = headers.last_before_each(lines)
    number = read.number
    readable = np.where(number >= 0, np.arange(number.size), -1)
    last_readable = np.maximum.accumulate(readable) if number.size else readable
    k = np.searchsorted(step_line, lines) - 1
    j = np.where(k >= 0, last_readable[np.maximum(k, 0)] if number.size else -1, -1)
    anchors = np.where(j >= 0, number[np.maximum(j, 0)] if number.size else -1, -1)
    out = []
    for e, line, t, row, other, anchor in zip(r.pending, found.tolist(), when.tolist(),
                                              rows.tolist(), others.tolist(),
                                              anchors.tolist(), strict=True):
        at = clock = None
        if (e.timed or e.own_header) and line >= 0 and (e.timed or line == e.line):
            at = round(t, 6)  # as one number, as ``round`` does
            clock = (read.clock(row) if row >= 0
                     else r.header_clock[other] if other >= 0 else None)
        fields = e.fields.copy()
        if "anchor_step" not in fields:
            fields["anchor_step"] = anchor if anchor >= 0 else None
        out.append(LogEvent(e.kind, e.line, e.text, at_s=at, clock=clock, **fields))
    return out


def _table(number: np.ndarray, cols: dict[str, np.ndarray], metrics: dict[str, np.ndarray],
           step_line: np.ndarray, p: ParsedLog
           ) -> tuple[StepTable[LogStep], np.ndarray | slice]:
    """The readable steps in step order, the first line of a repeated step kept (a log's
    lines can come out of order), and their positions among the step lines (a slice of all
    of them when they are every line, in order); counts the unreadable and repeated lines
    into ``p``."""
    time_s = cols.pop("time_s", np.full(number.size, math.nan))
    readable = (number >= 0) & ~np.isnan(time_s)
    p.unreadable_steps += int(number.size - readable.sum())
    keep = np.flatnonzero(readable)
    order = keep[np.argsort(number[keep], kind="stable")]
    first = np.ones(order.size, dtype=bool)
    first[1:] = number[order][1:] != number[order][:-1]
    p.duplicates = int(order.size - first.sum())
    order = order[first]
    take: np.ndarray | slice = order
    if order.size == number.size and bool((np.diff(order) > 0).all()):
        take = slice(None)  # every line, in order (the usual log): no copies
    columns = {"step": number[take], "time_s": time_s[take], "line": step_line[take]}
    columns.update({name: col[take] for name, col in cols.items()})
    maps = {"metrics": {key: col[take] for key, col in metrics.items()
                        if not np.isnan(col[take]).all()}}
    return StepTable(LogStep, order.size, columns, maps=maps), take


def parsed(r: Reader, n: int) -> ParsedLog:
    """What ``r`` read, finished (``finish``), its lines numbered up to ``n`` - 1."""
    finish(r)
    r.p.lines = n - 1
    return r.p
