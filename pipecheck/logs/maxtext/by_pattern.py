"""The pattern read of step lines: each tail by its keys (lines with as many commas and
one shape read as a group), each header by the absl pattern: the read for the shapes the
bulk read (``shaped``) does not take, and what that read is tested against."""

from __future__ import annotations

import math
import re
import warnings
from typing import NamedTuple

import numpy as np

from pipecheck.logs.maxtext.clock import header_times
from pipecheck.logs.maxtext.columns import StepColumns
from pipecheck.logs.maxtext.patterns import HAS_DIGIT, STEP_KEYS, STEP_MARK


class StepFields(NamedTuple):
    """A step line's numbers: pipecheck's own fields (``STEP_KEYS``' names) and the other
    metrics, each by its key."""

    fields: dict[str, float]
    metrics: dict[str, float]


def parse_step_text(rest: str) -> tuple[int, StepFields] | None:
    """The step number and fields of one step line from its number on (``12, seconds:
    0.4, ...``), or None without a readable ``seconds:``."""
    m = re.match(r"\s*(\d+)\s*,(.*)", rest)
    if m is None:
        return None
    fields: dict[str, float] = {}
    metrics: dict[str, float] = {}
    for piece in m.group(2).split(","):
        key, sep, value = piece.partition(":")
        if not sep:
            continue
        try:
            num = float(value)  # float() itself ignores the blanks around the number
        except ValueError:
            continue
        key = key.strip()
        if not key:
            continue
        name = STEP_KEYS.get(key)
        if name is None:
            metrics.setdefault(key, num)
        else:
            fields.setdefault(name, num)
    if "time_s" not in fields:
        return None
    return int(m.group(1)), StepFields(fields, metrics)


def read_by_pattern(lines: list[str]) -> StepColumns:
    """Step lines read one shape of tail at a time after their mark, and their headers by
    pattern: the read for shapes ``read_shaped`` does not take."""
    n = len(lines)
    parts = [raw.partition(STEP_MARK) for raw in lines]
    out = StepColumns.empty(n)
    out.number, out.has_loss, out.cols, out.metrics = _read_fields([x[2] for x in parts])
    out.own, (out.day, out.secs), groups = header_times([x[0] for x in parts])
    out.clocks = {k: groups[k][2] for k in np.flatnonzero(out.own).tolist()}
    return out


READ_CHUNK_LINES = 65536

"""Step lines of one shape read at a time: their joined text stays a few megabytes however
long the log."""


def _read_group(texts: list[str]) -> tuple[list[str], list[np.ndarray]] | None:
    """The keys and columns (step number first) of step lines of one shape, read in bulk:
    the sample's ``, key:`` pieces are replaced by blanks in the joined text, which numpy
    then reads as numbers in C; None when the lines are not all of the sample's shape or
    hold a value that is not a number (read one by one then)."""
    sample = texts[0]
    pieces = sample.split(",")
    if not pieces[0].strip().isdigit():
        return None
    keys, tokens = [], []
    for piece in pieces[1:]:
        colon = piece.find(":")
        if colon < 0 or not piece[:colon].strip() or HAS_DIGIT.search(piece[:colon]):
            return None  # no key, or one with a digit: lines of this shape may name another
        keys.append(piece[:colon].strip())
        tokens.append("," + piece[:colon + 1])
    if "time_s" not in (STEP_KEYS.get(key) for key in keys):
        return None  # no seconds: each line read on its own (none is a readable step)
    width = len(keys) + 1
    parts: list[list[np.ndarray]] = [[] for _ in range(width)]
    for lo in range(0, len(texts), READ_CHUNK_LINES):
        chunk = texts[lo:lo + READ_CHUNK_LINES]
        blob = "\n".join(chunk)
        for token in tokens:
            blob = blob.replace(token, " ")
        if ":" in blob or "," in blob:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # older numpy warns where it stops reading
                values = np.fromstring(blob, sep=" ")  # text mode, not the binary one
        except ValueError:  # a value that is not a number
            return None
        if values.size != len(chunk) * width:
            return None
        table = values.reshape(len(chunk), width)
        for j in range(width):
            parts[j].append(table[:, j])
    return keys, [np.concatenate(c) for c in parts]


def _read_one(k: int, text: str, number: np.ndarray, has_loss: np.ndarray,
              cols: dict[str, np.ndarray], metrics: dict[str, np.ndarray]) -> None:
    """Step line ``k`` read on its own (a shape seen once, or one ``_read_group`` refused)
    into the columns."""
    parsed = parse_step_text(text)
    if parsed is None:
        return
    number[k], (fields, found) = parsed
    has_loss[k] = "loss" in fields
    n = number.size
    for name, value in fields.items():
        cols.setdefault(name, np.full(n, math.nan))[k] = value
    for key, x in found.items():
        metrics.setdefault(key, np.full(n, math.nan))[k] = x


def _put_group(idx: np.ndarray, keys: list[str], columns: list[np.ndarray],
               number: np.ndarray, has_loss: np.ndarray, cols: dict[str, np.ndarray],
               metrics: dict[str, np.ndarray]) -> None:
    """A group read by ``_read_group`` into the columns (the first of a repeated key)."""
    n = number.size
    whole = columns[0]
    if not np.array_equal(whole, np.floor(whole)) or (whole < 0).any():
        raise ValueError("step numbers")
    number[idx] = whole.astype(np.int64)
    has_loss[idx] = "loss" in keys
    seen: set[str] = set()
    for key, col in zip(keys, columns[1:], strict=True):
        name = STEP_KEYS.get(key)
        if (name or key) in seen:  # the first of a field given twice (both TFLOP/s keys)
            continue
        seen.add(name or key)
        target = cols if name is not None else metrics
        target.setdefault(name or key, np.full(n, math.nan))[idx] = col


def _read_fields(texts: list[str]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray],
                                            dict[str, np.ndarray]]:
    """Step numbers (-1: unreadable), which lines carry a loss, the step columns and the
    metrics columns of the step lines' texts (after ``completed step:``), in their order:
    lines with as many commas are read as a group when they have one shape."""
    n = len(texts)
    number = np.full(n, -1, dtype=np.int64)
    has_loss = np.zeros(n, dtype=bool)
    cols: dict[str, np.ndarray] = {}
    metrics: dict[str, np.ndarray] = {}
    commas = np.fromiter((t.count(",") for t in texts), dtype=np.int64, count=n)
    for c in np.unique(commas):
        idx = np.flatnonzero(commas == c)
        group = texts if idx.size == n else [texts[k] for k in idx]
        got = _read_group(group) if idx.size > 1 else None
        if got is not None:
            try:
                _put_group(idx, *got, number, has_loss, cols, metrics)
                continue
            except ValueError:
                pass
        for k in idx.tolist():
            _read_one(k, texts[k], number, has_loss, cols, metrics)
    return number, has_loss, cols, metrics
