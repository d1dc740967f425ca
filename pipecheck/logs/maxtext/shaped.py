"""The bulk read of step lines of one shape (what is left of a line without its digits):
numpy reads every line's integers at once, and the shape's first line says which integer is
which and how many decimals each value has (checked on every line): ``read_shaped``."""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np

from pipecheck.logs.maxtext.clock import DAYS_BEFORE_MONTH, ORDINAL_2000, valid_clock
from pipecheck.logs.maxtext.columns import StepColumns
from pipecheck.logs.maxtext.patterns import GLOG_HEADER, HAS_DIGIT, STEP_KEYS, STEP_MARK

_NUMERIC = bytes(b if b in b"0123456789+-\n" else 32 for b in range(256))
"""A translation that keeps digits, signs and line ends and blanks everything else (keys,
punctuation, header letters), so numpy reads a line's numbers as integers."""

_NUMERIC_DELETE = bytes(sorted(set(range(ord("a"), ord("z") + 1)) - {ord("e")})) + b"._/"
"""Deleted before the translation, so numpy reads a shorter text (measured 25% faster):
dots (a value with ``d`` decimals is read as its digits, then divided by ``10**d``), and
the lower-case letters and ``_/`` of keys and file names. A number ``_layout`` reads is
preceded by a blank, a colon or an upper-case letter (an absl header's level) and followed
by a blank, a comma, a colon or an ``e`` (its exponent), which all stay as blanks, so it
never runs into another; digits elsewhere that run together do so alike on every line of
a shape."""

EXACT_POWER_OF_TEN = 22
"""The largest power of ten a float holds exactly: an integer below 2**53 divided or
multiplied by it is the correctly rounded value of its decimal text, as ``float()`` reads
it."""


_HEADER_LIKE = re.compile(r"[IWEF]\d+ \d+:\d+:\d")
"""What looks like an absl header without being one (``I0101 1:00:00``): a shape whose
first line has it may hold real headers too (digits gone, the two look alike)."""

_SAMPLE_VALUE = re.compile(
    r"[^\S\x1c-\x1f]*[-+]?(\d+)(?:\.(\d*))?(?:[eE][-+]?\d+)?[^\S\x1c-\x1f]*")
"""A value a shape's first line shows, that the bulk read takes (``nan``, ``inf`` or any
other text send the shape to the pattern read), with the blanks around it that ``float()``
takes (not ``\\x1c``-``\\x1f``, which ``str.isspace`` counts)."""


@dataclasses.dataclass
class _Field:
    """One number of a step line's shape: its token among the line's integers, the
    decimals the shape shows (checked on every line), and whether an exponent follows."""

    token: int
    decimals: int
    dot: int | None
    """The ordinal of its dot among the line's dots (None: no dot)."""
    exponent: bool = False
    negative: bool = False
    """The shape shows a minus sign before it (so a zero is ``-0.0``, as ``float()`` reads
    ``-0.000``)."""
    run_on: int = 0
    """How many of its first decimal places a value short of decimals could leave to the
    digits that follow (the decimals less the non-digits after them in the shape, the
    line end and the next line's head included): those are checked to be digits."""


@dataclasses.dataclass
class _Layout:
    """Where a step line shape's numbers are (``_layout``)."""

    tokens: int
    dots: int
    step: _Field
    values: list[tuple[str, _Field]]
    header: tuple[_Field, _Field, _Field, _Field] | None
    """Month and day (one token), hours, minutes, seconds; None: a bare line."""


def _int_tokens(text: bytes) -> int:
    """How many integers numpy reads from a translated text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return int(np.fromstring(text, dtype=np.int64, sep=" ").size) if text.strip() else 0


_DIGIT_BYTE = re.compile(rb"\d")


def _non_digits(line: bytes, at: int) -> int:
    """How many non-digits ``line`` has from position ``at`` on before a digit or its end."""
    digit = _DIGIT_BYTE.search(line, at)
    return (digit.start() if digit else len(line)) - at


def _nth(text: bytes, char: bytes, k: int) -> int:
    """Where the ``k``-th (from 0) ``char`` of ``text`` is."""
    at = -1
    for _ in range(k + 1):
        at = text.index(char, at + 1)
    return at


def _gap(line: bytes, at: int) -> int:
    """How many non-digits follow position ``at`` of ``line`` before a digit, running on
    over the line end into the next line of its shape (its head is this line's)."""
    gap = _non_digits(line, at)
    if at + gap < len(line):
        return gap
    return gap + 1 + _non_digits(line, 0)


def _layout(sample: str) -> _Layout | None:
    """The layout of a step line's shape from one line of it; None when it has a value
    the bulk read does not take (then every line of the shape is read by pattern)."""
    raw = sample.encode("utf-8", "surrogatepass")
    numeric = raw.translate(_NUMERIC, _NUMERIC_DELETE)
    if re.search(rb"[-+](?![0-9])|[0-9][-+]", numeric):
        return None  # a sign that is not a number's: leave it to the pattern read
    mark = sample.find(STEP_MARK)
    tail_at = mark + len(STEP_MARK)

    def field(offset: int, text: str, exponent_ok: bool = True) -> _Field | None:
        m = _SAMPLE_VALUE.fullmatch(text)
        exponent = "e" in text or "E" in text
        if m is None or (exponent and not exponent_ok):
            return None
        prefix = sample[:offset + len(text) - len(text.lstrip())].encode(
            "utf-8", "surrogatepass")
        dotted = m.group(2) is not None
        decimals = len(m.group(2)) if dotted else 0
        dot = prefix.count(b".") if dotted else None
        return _Field(_int_tokens(prefix.translate(_NUMERIC, _NUMERIC_DELETE)), decimals,
                      dot, exponent, text.lstrip().startswith("-"),
                      decimals - _gap(raw, _nth(raw, b".", dot) + 1 + decimals)
                      if dot is not None else 0)

    header: tuple[_Field, _Field, _Field, _Field] | None = None
    h = GLOG_HEADER.search(sample, 0, mark)
    if h is None and _HEADER_LIKE.search(sample, 0, mark):
        return None  # a header this shape shares with real ones: each line read by pattern
    if h is not None:
        md, hh, mm, ss = (field(h.start("month"), h["month"] + h["day"]),
                          field(h.start("h"), h["h"]), field(h.start("m"), h["m"]),
                          field(h.start("s"), h["s"]))
        if (md is None or hh is None or mm is None or ss is None
                or any(f.exponent for f in (md, hh, mm, ss))):
            return None
        header = (md, hh, mm, ss)
    pieces = sample[tail_at:].split(",")
    step = field(tail_at, pieces[0], exponent_ok=False)
    if step is None or step.dot is not None or not pieces[0].strip().isdigit():
        return None
    values: list[tuple[str, _Field]] = []
    offset = tail_at + len(pieces[0]) + 1
    for piece in pieces[1:]:
        colon = piece.find(":")
        key = piece[:colon].strip() if colon >= 0 else ""
        if not key or HAS_DIGIT.search(key):
            return None  # a key with a digit: lines of this shape may name another key
        f = field(offset + colon + 1, piece[colon + 1:])
        if f is None:
            return None
        values.append((key, f))
        offset += len(piece) + 1
    if "time_s" not in (STEP_KEYS.get(key) for key, _ in values):
        return None  # no seconds: not a readable step, which the pattern read says
    return _Layout(_int_tokens(numeric), raw.count(b"."), step, values, header)


_IS_DIGIT = np.zeros(256, dtype=bool)
_IS_DIGIT[48:58] = True
"""Which bytes are ASCII digits (looked up, one gather per test)."""


def read_shaped(data: bytes, sample: str, n: int) -> StepColumns | None:
    """``n`` step lines of one shape (``data``: their UTF-8 text, each ending in a line
    end) read at once: numpy reads every line's integers, the shape's layout (taken from
    ``sample``, its first line) says which is which, and each value's dot is checked to
    have as many decimals as the sample's. None when the shape has a value this read does
    not take or a line does not fit the layout (read by pattern then)."""
    layout = _layout(sample)
    if layout is None or layout.tokens == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            flat = np.fromstring(data.translate(_NUMERIC, _NUMERIC_DELETE), dtype=np.int64, sep=" ")
        except ValueError:
            return None
    if flat.size != n * layout.tokens:
        return None
    table = flat.reshape(n, layout.tokens)
    if not _decimals_hold(data, layout, n):
        return None
    out = StepColumns.empty(n)
    number = table[:, layout.step.token]
    if (number < 0).any():
        return None
    out.number = number.copy()
    for key, f in layout.values:
        x = _value(table, f)
        if x is None:
            return None
        name = STEP_KEYS.get(key)
        target = out.cols if name is not None else out.metrics
        target.setdefault(name or key, x)  # the first of a repeated key
    out.has_loss[:] = "loss" in (key for key, _ in layout.values)
    if layout.header is not None and not _read_headers(table, layout.header, out):
        return None
    return out


def _decimals_hold(data: bytes, layout: _Layout, n: int) -> bool:
    """Whether every line's value has as many decimals as the shape's first line shows
    (each dot is followed by that many digits and then by no digit)."""
    fields = [f for f in (layout.step, *(f for _, f in layout.values), *(layout.header or ()))
              if f.dot is not None]
    if not fields:
        return True
    buf = np.frombuffer(data, dtype=np.uint8)
    dots = np.flatnonzero(buf == 46)
    if dots.size != n * layout.dots:
        return False
    at = dots.reshape(n, layout.dots)[:, [f.dot for f in fields]]
    ends = at + np.array([f.decimals for f in fields])  # each value's last decimal
    if ends.max() + 1 >= buf.size:  # a line with fewer decimals, last in the text
        return False
    for j, f in enumerate(fields):  # the first places where a short value could run on
        for place in range(1, f.run_on + 1):  # into the digits after it (``_Field.run_on``)
            if not _IS_DIGIT[buf[at[:, j] + place]].all():
                return False
    return bool(_IS_DIGIT[buf[ends[:, [f.decimals > 0 for f in fields]]]].all()
                and not _IS_DIGIT[buf[ends + 1]].any())


def _value(table: np.ndarray, f: _Field) -> np.ndarray | None:
    """A field's values from the integers read: its digits scaled by its decimals (and its
    exponent), exactly as ``float()`` reads the text; None past what that keeps exact."""
    digits = table[:, f.token]
    if (np.abs(digits) >= 2 ** 53).any():
        return None
    scale = -f.decimals + (table[:, f.token + 1] if f.exponent else 0)
    if (np.abs(scale) > EXACT_POWER_OF_TEN).any():
        return None
    x = -np.abs(digits).astype(np.float64) if f.negative else digits.astype(np.float64)
    if not f.exponent:
        return x / 10.0 ** f.decimals if f.decimals else x
    return np.where(scale >= 0, x * 10.0 ** np.maximum(scale, 0),
                    x / 10.0 ** np.maximum(-scale, 0))


def _read_headers(table: np.ndarray, header: tuple[_Field, _Field, _Field, _Field],
                  out: StepColumns) -> bool:
    """The absl headers' days and times into ``out``; False when one is not a date and
    time of day."""
    md, hh, mm, ss = header
    month, dday = np.divmod(table[:, md.token], 100)
    hours, minutes = table[:, hh.token], table[:, mm.token]
    seconds = _value(table, ss)
    if seconds is None or not valid_clock(month, dday, hours, minutes, seconds).all():
        return False
    out.own[:] = True
    out.day = ORDINAL_2000 + DAYS_BEFORE_MONTH[month - 1] + dday
    out.secs = hours * 3600.0 + minutes * 60.0 + seconds
    out.decimals[:] = ss.decimals if ss.dot is not None else -1
    return True
