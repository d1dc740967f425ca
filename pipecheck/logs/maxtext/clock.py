"""The dates and times of absl headers: a day number of the leap year 2000 (a header has
no year; ``new_years`` adds one after each New Year's Eve) and seconds in the day, for one
header or for many step lines' heads at once (``header_times``)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence

import numpy as np

_DAYS_IN_MONTH = np.array([31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
"""Days of each month of a leap year (an absl header has no year: 29 February can be)."""

DAYS_BEFORE_MONTH = np.concatenate(([0], np.cumsum(_DAYS_IN_MONTH)[:-1]))
"""Days of the (leap) year 2000 before each month: an absl header has no year."""

ORDINAL_2000 = datetime.date(2000, 1, 1).toordinal() - 1


def valid_clock(month: np.ndarray, day: np.ndarray, hours: np.ndarray, minutes: np.ndarray,
                seconds: np.ndarray) -> np.ndarray:
    """Whether a header's date and time can be one (arrays of them): a day of
    its month (1-12), hours up to 23, minutes and seconds under 60. A header that cannot be
    is read as no header, by every reader alike."""
    in_year = (month >= 1) & (month <= 12)
    last_day = _DAYS_IN_MONTH[np.clip(month, 1, 12) - 1]
    return (in_year & (day >= 1) & (day <= last_day) & (hours <= 23) & (minutes <= 59)
            & (seconds < 60))


_MONTH_DAYS = tuple(_DAYS_IN_MONTH.tolist())


def day_and_seconds(m: re.Match[str]) -> tuple[int, float] | None:
    """An absl header's date (a day number of the leap year 2000: the year is not logged,
    ``new_years`` tells it) and time of day in seconds; None where it cannot be a date and
    time (``valid_clock``'s rule, for one header: a numpy call per line costs more)."""
    month, day, hours, minutes = int(m["month"]), int(m["day"]), int(m["h"]), int(m["m"])
    seconds = float(m["s"])
    if not (1 <= month <= 12 and 1 <= day <= _MONTH_DAYS[month - 1] and hours <= 23
            and minutes <= 59 and seconds < 60):
        return None
    return (ORDINAL_2000 + int(DAYS_BEFORE_MONTH[month - 1]) + day,
            hours * 3600.0 + minutes * 60.0 + seconds)


_HEAD = re.compile(
    r"(?m)^(?:[^\n]*?[IWEF](\d{2})(\d{2}) ((\d{2}):(\d{2}):(\d{2}(?:\.\d+)?))\s+\d+\s+"
    r"[^\s:\]\n]+:\d+\])?[^\n]*$")
"""``GLOG_HEADER`` found, or not, in each of many lines at once (one match per line)."""
_HEAD_TAILS = re.compile(r"(?m)^\s+\d+\s+[^\s:\]\n]+:\d+\]\s?$")
"""What follows the time in an absl header at the start of a line, to the end of the head
(matched over many heads at once, one per line)."""


_FIXED_HEAD = 21
"""``I0312 09:15:50.253000``: an absl header's level, date and time, when it starts the
line, at fixed places (read for all such lines at once, ``_fixed_header_times``)."""


def _fixed_header_times(heads: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which heads start with an absl header whose time has microseconds (checked char by
    char, at once, on their first ``_FIXED_HEAD`` characters), and its day number and
    seconds."""
    text = "".join(h[:_FIXED_HEAD].ljust(_FIXED_HEAD) for h in heads)
    b = np.frombuffer(text.encode("latin-1", "replace"), dtype=np.uint8).reshape(
        len(heads), _FIXED_HEAD)
    d = b.astype(np.int32) - 48
    digits = (d >= 0) & (d <= 9)
    ok = (np.isin(b[:, 0], np.frombuffer(b"IWEF", dtype=np.uint8))
          & digits[:, [1, 2, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 17, 18, 19, 20]].all(axis=1)
          & (b[:, 5] == 32) & (b[:, 8] == 58) & (b[:, 11] == 58) & (b[:, 14] == 46))
    month, dday = d[:, 1] * 10 + d[:, 2], d[:, 3] * 10 + d[:, 4]
    ok &= valid_clock(month, dday, d[:, 6] * 10 + d[:, 7], d[:, 9] * 10 + d[:, 10],
                       d[:, 12] * 10 + d[:, 13])
    day = ORDINAL_2000 + DAYS_BEFORE_MONTH[np.clip(month, 1, 12) - 1] + dday
    micros = d[:, 15:21].astype(np.int64) @ (10 ** np.arange(5, -1, -1))
    secs = ((d[:, 6] * 10 + d[:, 7]) * 3600 + (d[:, 9] * 10 + d[:, 10]) * 60
            + d[:, 12] * 10 + d[:, 13]) + micros / 1e6
    return ok, day, secs


class _Clocks:
    """The matched groups of heads that start with an absl header, made when asked for
    (only an event timed by a step line's header asks)."""

    def __init__(self, heads: list[str]) -> None:
        self.heads = heads

    def __getitem__(self, k: int) -> tuple[str, str, str]:
        h = self.heads[k]
        return h[1:3], h[3:5], h[6:_FIXED_HEAD]


def header_times(heads: list[str]) -> tuple[np.ndarray, np.ndarray,
                                             Sequence[tuple[str, ...]] | _Clocks]:
    """For each text before a step line's mark: whether it holds an absl header, its day
    number and its seconds in the day (0 where none), and the matched groups (for the
    clock; computed from the day and seconds for headers at the start of the line)."""
    if heads:
        ok, fday, fsecs = _fixed_header_times(heads)
        # a fixed-place header must also be one by the pattern (thread id, source:line])
        tails = "\n".join(h[_FIXED_HEAD:] for h in heads)
        if ok.all() and len(_HEAD_TAILS.findall(tails)) == len(heads):
            return ok, np.stack([fday, fsecs]), _Clocks(heads)
    found = _HEAD.findall("\n".join(heads)) if heads else []
    if len(found) != len(heads):  # cannot happen: one match per line
        raise AssertionError("header matches do not line up with the step lines")
    month, dday, hours, minutes = (np.array([g[i] or "0" for g in found], dtype=np.int64)
                                   for i in (0, 1, 3, 4))
    has = valid_clock(month, dday, hours, minutes,
                       np.array([g[5] or "0" for g in found], dtype=np.float64))
    day = np.zeros(len(heads), dtype=np.int64)
    secs = np.zeros(len(heads))
    if has.any():
        sub = [found[k] for k in np.flatnonzero(has)]
        day[has] = ORDINAL_2000 + DAYS_BEFORE_MONTH[month[has] - 1] + dday[has]
        secs[has] = (np.array([g[3] for g in sub], dtype=np.float64) * 3600.0
                     + np.array([g[4] for g in sub], dtype=np.float64) * 60.0
                     + np.array([g[5] for g in sub], dtype=np.float64))
    return has, np.stack([day, secs]), found


NEW_YEAR_DAYS = 180
"""A header dated at least this many days before the header above it (in line order) is
in the next year, one dated this many days after it back in the year before: an absl
header has no year, and a run over New Year's Eve goes from ``1231`` to ``0101``."""


def new_years(step_line: np.ndarray, step_days: np.ndarray, other_line: np.ndarray,
               other_days: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The day numbers of the step lines' and the other lines' headers with a year added
    after each New Year's Eve the log crosses (``NEW_YEAR_DAYS``), so times never run
    backwards by a year. Days count in the leap year 2000 (``DAYS_BEFORE_MONTH``), so a
    year is its 366 days: 31 December is then the day before 1 January."""
    both = np.concatenate([step_days, other_days])
    if not both.size or int(both.max()) - int(both.min()) < NEW_YEAR_DAYS:
        return step_days, other_days
    order = np.argsort(np.concatenate([step_line, other_line]), kind="stable")
    seq = both[order]
    jump = np.diff(seq)
    years = np.concatenate([[0], np.cumsum((jump <= -NEW_YEAR_DAYS).astype(np.int64)
                                           - (jump >= NEW_YEAR_DAYS))])
    out = np.empty_like(both)
    out[order] = seq + 366 * years
    return out[:step_days.size], out[step_days.size:]
