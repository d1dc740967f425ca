"""MaxText training logs read into ``analysis.maxtext.ParsedLog`` (``pipecheck import``).

Only the lines that matter are read; everything else is ignored. Lines carry an absl
header (``I1122 10:23:54.123456 140234567 train.py:512] ...``: level, date, time, thread
id, source) or none (``print`` output), may have a prefix before it (``# `` in a script's
comments, a pod name), end in ``\\n`` or ``\\r\\n``, and are interleaved with lines of other
threads and processes; so every pattern is searched for anywhere in a line and nothing
depends on two lines being adjacent, except ``Per train step:``, whose ``Total TFLOPs``
arrives on a later line, and a log viewer's timestamp line (a date and time alone, which
Cloud Logging writes above each entry: ``_STAMP``), which times the line below it as that
line's own header would (on the absl headers' clock: ``_stamp``). A checkpoint line
without a header takes the time of the last header before it; a bare step line, the time
of the next one (the step interval needs a time it was written by, not after). Other
events (eval, profiler windows, synchronous saves, restores, restarts) are timed only by
their own header; without one they are placed by line order.

A log file is read as bytes, a block at a time (``_Reader.read_block``). The usual block,
step lines of one shape among a few other lines, is taken apart without splitting its step
lines (``_split_block``); any other block (non-ASCII, a line break other than ``\n``,
several shapes) is decoded and split as ``str.splitlines`` splits it; either way the lines
are numbered and read alike (tested).

Step lines are read in bulk, a block of lines at a time (``_read_steps``): the lines of
one shape (what is left of a line without its digits: the same keys, separators, dots and
header) are translated to integers that numpy reads at once, the shape's first line says
which integer is which and how many decimals each value has (checked on every line), so a
million-step log costs a few passes in C, not a million dicts. A shape this read does not
take (``nan``, a sign that is not a number's) is read by pattern, a tail and a header at a
time: each tail by its keys, each header by the absl pattern (``_read_by_pattern``); the
two reads agree (tested), so a line reads the same whichever lines it is read with, but
for one thing: an absl header with a digit too few or too many in a field (``I101``,
``1:00:00``), which absl never writes, has the shape of a real one and is read as one
where it is read with real ones (the pattern read takes none such). A header whose date or
time cannot be (month 13, minute 60) is read as no header by every read.
A step line without a readable ``seconds:`` is skipped and counted (``unreadable_steps``),
as is a ``completed profiler activation/deactivation step`` line (MaxText hides those
steps' times; the step is kept as a profiler event instead).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import itertools
import math
import operator
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, TextIO

import numpy as np

from pipecheck.analysis.maxtext import ParsedLog, summarize
from pipecheck.errors import LogFormatError
from pipecheck.logs import forked
from pipecheck.logs.text import GZIP_MAGIC, file_size, open_bytes
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.imported import ImportedRun, LogEvent, LogStep
from pipecheck.records.steps import StepTable, compress_ahead

# --- line patterns ---------------------------------------------------------------------
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
GLOG_HEADER = re.compile(
    r"[IWEF](?P<month>\d{2})(?P<day>\d{2}) (?P<clock>(?P<h>\d{2}):(?P<m>\d{2}):"
    r"(?P<s>\d{2}(?:\.\d+)?))\s+(?P<thread>\d+)\s+[^\s:\]]+:\d+\]\s?")
_STAMP = re.compile(
    r"[^\w\n]*\d{4}-(?P<month>\d{2})-(?P<day>\d{2})[ T](?P<clock>(?P<h>\d{2}):(?P<m>\d{2}):"
    r"(?P<s>\d{2}(?:\.\d+)?))(?:\s*(?:Z|[A-Z]{2,5}|[+-]\d{2}:?\d{2}))?\s*")
"""A line of a date and time alone (``2023-10-03 11:48:40.025 PDT``, after a prefix such as
``# ``; ISO ``2023-10-03T18:48:40.025Z`` too): the timestamp a log viewer such as Cloud
Logging writes on a line of its own above each entry. It times the line below it as an
absl header would (matched whole, with ``fullmatch``; the year is not used, as an absl
header has none)."""
STEP_MARK = "completed step:"
PROFILER_STEP_MARK = "completed profiler activation/deactivation step:"
_PARAMS = re.compile(rf"number parameters:\s*({_NUM})\s*billion")
_JAX = re.compile(r"System Information: Jax Version:\s*(\S+)")
_JAXLIB = re.compile(r"System Information: Jaxlib Version:\s*(\S+)")
_BACKEND = re.compile(r"System Information: Jax Backend:\s*(.*\S)")
_TOTAL_MEM = re.compile(rf"Total memory size:\s*({_NUM})\s*GB")
_OUTPUT_MEM = re.compile(rf"Output size:\s*({_NUM})\s*GB")
_TEMP_MEM = re.compile(rf"Temp size:\s*({_NUM})\s*GB")
_USING = re.compile(rf"Using \(GB\)\s*({_NUM})\s*/\s*({_NUM})")
_SAVE = re.compile(r"Saving checkpoint at step\s*(\d+)")
_SAVED = re.compile(r"[Ss]aved a checkpoint at step\s*(\d+)")
_ASYNC = re.compile(r"Started an asynchronous checkpoint save for step\s*(\d+)")
_BG_START = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Background save thread started")
_BG_DONE = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Background save thread done\."
    rf"(?: Time taken:\s*(?P<seconds>{_NUM})\s*s)?")
"""Orbax writes the thread's time on this line in recent versions, not in older ones."""
_BLOCKING_SAVE = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Initiated Pytree async_save\."
    rf" Time taken:\s*(?P<seconds>{_NUM})\s*s")
"""Orbax's handler writes this on the calling (training) thread when the blocking part of
an async save ends (base_pytree_checkpoint_handler.py, ``async_save``): the state's arrays
are copied off the device and the background write is handed its futures. Orbax before
0.11.14 does not write it."""
_WAIT_PREV = re.compile(rf"Waiting for previous save to complete took\s*({_NUM})\s*seconds")
_WAIT_STEP = re.compile(
    rf"Waited\s*({_NUM})\s*seconds for step\s*(\d+)\s*to finish before starting checkpointing"
)
_PER_STEP = re.compile(r"Per train step:")
_TOTAL_TFLOPS = re.compile(rf"Total TFLOPs:\s*({_NUM})")
# MaxText before mid-2024 wrote the total on one line: "Per train step, total TFLOPs will
# be 1033.20, split as 96.17% learnable weight flops and 3.83% attention flops"
_TOTAL_TFLOPS_ONE_LINE = re.compile(rf"Per train step, total TFLOPs will be\s*({_NUM})")
_CONFIG = re.compile(r"Config param\s+(\w+):\s*(.*?)\s*$")

# Events that are not orbax's async machinery: (kind, pattern). The first match wins.
_ACTIVITY = (
    ("eval_start", re.compile(r"Running evaluation(?: on train step\s*(\d+))?")),
    ("eval_end", re.compile(r"Completed eval after train step\s*(\d+)|eval metrics after step:"
                            r"\s*(\d+)")),
    ("eval_step", re.compile(r"Completed eval step:?\s*(\d+)")),
    ("profiler_boundary", re.compile(r"completed profiler activation/deactivation step:\s*(\d+)")),
    ("profiler_start", re.compile(r"Capture range started|jax\.profiler\.start_trace|"
                                  r"[Ss]tart(?:ed|ing) (?:the )?(?:jax )?profil")),
    ("profiler_stop", re.compile(r"Capture range ended|jax\.profiler\.stop_trace|"
                                 r"[Ss]top(?:ped|ping) (?:the )?(?:jax )?profil")),
    ("profiler_report", re.compile(r"Generat(?:ing|ed)\b.*\.(?:nsys-rep|qdstrm)|"
                                   r"\.nsys-rep$")),
    ("sync_save_start", re.compile(r"\[sync\] Started save checkpoint|Saving item to\b")),
    ("sync_save_end", re.compile(r"\[sync\] Finished save in\s*(" + _NUM + r")\s*seconds|"
                                 r"Finished synchronous save|Finished saving checkpoint")),
    ("restore_start", re.compile(r"Restoring (?:item|checkpoint) from|restoring params from|"
                                 r"restoring from this run's directory")),
    ("restore_end", re.compile(r"Finished restoring checkpoint|Restored checkpoint")),
    ("restart", re.compile(r"Slice down event detected|Elastic attempt \d+|"
                           r"[Pp]reemption (?:signal|notice) received|received preemption")),
    ("hlo_dump", re.compile(r"HloModule dump enabled[^\n]*")),
)
_ACTIVITY_HINT = re.compile(
    r"evaluation|eval |Completed eval|profil|Capture range|nsys-rep|qdstrm|\[sync\]|"
    r"Saving item|synchronous save|saving checkpoint|[Rr]estor|Slice down|Elastic attempt|"
    r"reemption|HloModule dump")
"""A cheap test a line must pass before the ``_ACTIVITY`` patterns are tried."""

_STEP_KEYS = {
    "seconds": "time_s",
    "TFLOP/s/device": "tflops_per_s_per_device",
    "TFLOP/s": "tflops_per_s_per_device",
    "Tokens/s/device": "tokens_per_s_per_device",
    "loss": "loss",
}
"""The step line's keys read into ``LogStep`` fields (any other key is a metric). MaxText
before 2024 printed the same per-device value as ``TFLOP/s`` (its ``write_metrics``:
``TFLOP/s: {metrics['scalar']['perf/per_device_tflops_per_sec']}``), later as
``TFLOP/s/device``."""


PROGRESS_EVERY_LINES = 20000
"""Lines read between two progress updates: often enough for a smooth bar, rare enough to
cost nothing next to parsing them."""


def _config_value(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_step_text(rest: str) -> tuple[int, dict[str, Any]] | None:
    """The step number and fields of one step line from its number on (``12, seconds:
    0.4, ...``), or None without a readable ``seconds:``."""
    m = re.match(r"\s*(\d+)\s*,(.*)", rest)
    if m is None:
        return None
    fields: dict[str, Any] = {}
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
        name = _STEP_KEYS.get(key)
        if name is None:
            metrics.setdefault(key, num)
        else:
            fields.setdefault(name, num)
    if "time_s" not in fields:
        return None
    fields["metrics"] = metrics
    return int(m.group(1)), fields


def _physical_lines(lines: Iterable[str]) -> Iterator[str]:
    """Split what an iterable of lines yields the way ``str.splitlines`` splits the whole
    text, so line numbers do not depend on how the log was handed over."""
    for chunk in lines:
        yield from (chunk.splitlines() or [""])


READ_BLOCK_CHARS = 1 << 22
"""Characters read from a file at a time: its lines are split in C, a block at a time."""


def _file_lines(f: TextIO, progress: Callable[[int], None] | None) -> Iterator[list[str]]:
    """A text file's lines as ``str.splitlines`` splits its whole text, in lists of about
    ``READ_BLOCK_CHARS`` characters (each block cut after its last ``\\n``, so a
    ``\\r\\n`` is never split)."""
    carry = ""
    while True:
        block = f.read(READ_BLOCK_CHARS)
        if progress is not None and block:
            progress(len(block))
        if not block:
            if carry:
                yield carry.splitlines() or [""]
            return
        text = carry + block
        cut = text.rfind("\n") + 1
        if cut == 0:
            carry = text
            continue
        carry = text[cut:]
        yield text[:cut].splitlines()


def _byte_blocks(stream: BinaryIO, progress: Callable[[int], None] | None
                 ) -> Iterator[bytes]:
    """A binary stream in blocks of about ``READ_BLOCK_CHARS`` bytes, each read on to the
    end of its last line (the last block: to the end of the stream)."""
    while block := stream.read(READ_BLOCK_CHARS):
        if not block.endswith(b"\n"):
            block += stream.readline()
        if progress is not None:
            progress(len(block))
        yield block


_STEP_MARK_BYTES = STEP_MARK.encode("ascii")

_ASCII_BREAKS = re.compile(rb"[\r\x0b\x0c\x1c-\x1e]")
"""ASCII characters other than ``\n`` that ``str.splitlines`` ends a line at."""


@dataclasses.dataclass
class _SplitBlock:
    """A block of whole lines taken apart without splitting its step lines
    (``_split_block``)."""

    lines: int
    steps: bytes
    """The step lines, each ending in ``\n``, all of one shape."""
    sample: str
    """The first step line (its shape's layout is read from it)."""
    step_at: np.ndarray
    """Each step line's line index in the block."""
    others: list[tuple[int, str]]
    """The other lines: line index in the block, text without its line end."""


SPLIT_MAX_OTHER_SHARE = 1 / 8
"""A block whose other lines are more than this share of its lines is split line by line:
past it, taking them out one by one costs more than the split saves (a 300,000-step log
read in one pass, against its lines split: 0.71x the time with 1% other lines, 0.91x with
9%, 1.03x with 17%)."""

SPLIT_PROBE_BYTES = 1 << 16
"""The head of a block whose lines are counted first: a head with too many other lines
(``SPLIT_MAX_OTHER_SHARE``) sends the block to the line split before any other work."""


def _few_others(text: bytes) -> bool:
    """Whether no more than ``SPLIT_MAX_OTHER_SHARE`` of the lines of ``text`` are other
    than step lines (by its line ends and step marks)."""
    lines = text.count(b"\n")
    return text.count(_STEP_MARK_BYTES) >= (1 - SPLIT_MAX_OTHER_SHARE) * lines


def _split_block(block: bytes) -> _SplitBlock | None:
    """A block's step lines and other lines apart, or None where that needs its lines
    split one by one (then ``str.splitlines`` splits its decoded text). Taken apart here:
    an ASCII block of lines ending in ``\\n`` (and no other line break) whose step lines
    all have the shape of its first (what is left without digits), and few other lines
    (``SPLIT_MAX_OTHER_SHARE``): the lines whose shape is as long as that one's are checked
    to be that shape all at once, the rest are the other lines, checked to hold no step
    mark."""
    mark = block.find(_STEP_MARK_BYTES)
    if (mark < 0 or not block.endswith(b"\n") or not block.isascii()
            or not _few_others(block[:SPLIT_PROBE_BYTES])):
        return None
    start, end = block.rfind(b"\n", 0, mark) + 1, block.index(b"\n", mark) + 1
    shape = block[start:end].translate(None, _SKELETON_DELETE)
    shapes = block.translate(None, _SKELETON_DELETE)
    shape_ends = np.flatnonzero(np.frombuffer(shapes, dtype=np.uint8) == 10) + 1
    shape_starts = np.concatenate(([0], shape_ends[:-1]))
    is_step = shape_ends - shape_starts == len(shape)
    step_at = np.flatnonzero(is_step)
    at = np.flatnonzero(~is_step)
    lines = shape_ends.size
    if (at.size > SPLIT_MAX_OTHER_SHARE * lines or _ASCII_BREAKS.search(shape)
            or _cut_out(shapes, shape_starts[at], shape_ends[at]) != shape * step_at.size
            or block.count(_STEP_MARK_BYTES) != step_at.size):  # a line of that shape
        return None                                           # without the mark itself
    sample = block[start:end - 1].decode("ascii")
    if not at.size:
        return _SplitBlock(lines, block, sample, step_at, [])
    line_ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10) + 1
    starts, ends = np.concatenate(([0], line_ends[:-1]))[at], line_ends[at]
    other_text = b"\n".join([block[a:b - 1] for a, b in zip(starts.tolist(), ends.tolist(),
                                                           strict=True)])
    if _STEP_MARK_BYTES in other_text or _ASCII_BREAKS.search(other_text):
        return None  # a step line of another shape, or a line break inside a line
    others = list(zip(at.tolist(), other_text.decode("ascii").split("\n"), strict=True))
    return _SplitBlock(lines, _cut_out(block, starts, ends), sample, step_at, others)


def _cut_out(data: bytes, starts: np.ndarray, ends: np.ndarray) -> bytes:
    """``data`` without its spans ``starts[i]:ends[i]`` (in order, not overlapping)."""
    if not starts.size:
        return data
    spans = itertools.chain.from_iterable(zip(starts.tolist(), ends.tolist(), strict=True))
    keep = [0, *spans, len(data)]
    return b"".join(data[keep[i]:keep[i + 1]] for i in range(0, len(keep), 2))


_DAYS_IN_MONTH = np.array([31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
"""Days of each month of a leap year (an absl header has no year: 29 February can be)."""

_DAYS_BEFORE_MONTH = np.concatenate(([0], np.cumsum(_DAYS_IN_MONTH)[:-1]))
"""Days of the (leap) year 2000 before each month: an absl header has no year."""

ORDINAL_2000 = datetime.date(2000, 1, 1).toordinal() - 1


def _valid_clock(month: Any, day: Any, hours: Any, minutes: Any, seconds: Any) -> Any:
    """Whether a header's date and time can be one (numbers or arrays of them): a day of
    its month (1-12), hours up to 23, minutes and seconds under 60. A header that cannot be
    is read as no header, by every reader alike."""
    in_year = (month >= 1) & (month <= 12)
    last_day = _DAYS_IN_MONTH[np.clip(month, 1, 12) - 1]
    return (in_year & (day >= 1) & (day <= last_day) & (hours <= 23) & (minutes <= 59)
            & (seconds < 60))


_MONTH_DAYS = tuple(_DAYS_IN_MONTH.tolist())


def _day_and_seconds(m: re.Match[str]) -> tuple[int, float] | None:
    """An absl header's date (a day number of the leap year 2000: the year is not logged,
    ``_new_years`` tells it) and time of day in seconds; None where it cannot be a date and
    time (``_valid_clock``'s rule, for one header: a numpy call per line costs more)."""
    month, day, hours, minutes = int(m["month"]), int(m["day"]), int(m["h"]), int(m["m"])
    seconds = float(m["s"])
    if not (1 <= month <= 12 and 1 <= day <= _MONTH_DAYS[month - 1] and hours <= 23
            and minutes <= 59 and seconds < 60):
        return None
    return (ORDINAL_2000 + int(_DAYS_BEFORE_MONTH[month - 1]) + day,
            hours * 3600.0 + minutes * 60.0 + seconds)


_HEAD = re.compile(
    r"(?m)^(?:[^\n]*?[IWEF](\d{2})(\d{2}) ((\d{2}):(\d{2}):(\d{2}(?:\.\d+)?))\s+\d+\s+"
    r"[^\s:\]\n]+:\d+\])?[^\n]*$")
"""``GLOG_HEADER`` found, or not, in each of many lines at once (one match per line)."""
_HEAD_TAILS = re.compile(r"(?m)^\s+\d+\s+[^\s:\]\n]+:\d+\]\s?$")
"""What follows the time in an absl header at the start of a line, to the end of the head
(matched over many heads at once, one per line)."""


@dataclasses.dataclass
class _Pending:
    """An event line read, made a ``LogEvent`` once the log's times are known."""

    kind: str
    line: int
    text: str
    timed: bool
    """Takes the time of the last header at or before its line (checkpoint lines);
    otherwise only its own header's."""
    own_header: bool
    fields: dict[str, Any]


class _Reader:
    """The state of one pass over a log's lines. Step lines are read in bulk a block at a
    time (``_read_steps``) into numbers; the other lines one by one. The times of the
    events and of bare step lines (the next header's) are set at the end (``_finish``)."""

    def __init__(self) -> None:
        self.p = ParsedLog()
        self.chunks: list[_StepColumns] = []
        self.chunk_lines: list[np.ndarray] = []
        self.first_step_line: float = math.inf
        self.pending: list[_Pending] = []
        self.header_line: list[int] = []  # other lines with a header: line, day, seconds
        self.header_day: list[int] = []
        self.header_s: list[float] = []
        self.header_clock: list[str] = []
        self.pending_tflops = False
        self.stamps: list[tuple[int, int, float, str]] = []
        """Lines timed by a timestamp line above them (``_STAMP``): line, day, seconds,
        clock text."""
        self.started_by_config = False
        """A ``Config param`` line came before any step line read so far (one way the log
        shows the run starting; the others set ``p.start_seen`` whatever came before)."""

    def read(self, lines: list[str], first: int) -> int:
        """Read ``lines`` numbered from ``first``; returns the next line number."""
        flags = list(map(operator.contains, lines, itertools.repeat(STEP_MARK)))
        is_step = np.fromiter(flags, dtype=bool, count=len(flags))
        at = np.flatnonzero(is_step)
        if at.size:
            self.first_step_line = min(self.first_step_line, first + int(at[0]))
            self.chunks.append(_read_steps(list(itertools.compress(lines, flags))))
            self.chunk_lines.append(at + first)
        if at.size < len(lines):
            others = itertools.compress(zip(itertools.count(first), lines),
                                        map(operator.not_, flags))
            for n, raw in others:
                self.other_line(raw, n)
        return first + len(lines)

    def read_block(self, block: bytes, first: int) -> int:
        """Read a block of a log's bytes (whole lines) numbered from ``first``, as ``read``
        reads its decoded lines; returns the next line number. A block of one step line
        shape and a few other lines (``_split_block``) is read without splitting its step
        lines apart."""
        split = _split_block(block)
        if split is None:
            return self.read(block.decode("utf-8", "replace").splitlines() or [""], first)
        if split.step_at.size:
            self.first_step_line = min(self.first_step_line, first + int(split.step_at[0]))
            read = _read_shaped(split.steps, split.sample, split.step_at.size)
            self.chunks.append(read if read is not None else _read_steps(
                split.steps.decode("ascii").splitlines()))
            self.chunk_lines.append(split.step_at + first)
        for k, line in split.others:
            self.other_line(line, first + k)
        return first + split.lines

    def other_line(self, raw: str, n: int) -> None:
        line = raw.rstrip("\r\n")
        h = GLOG_HEADER.search(line)
        when = _day_and_seconds(h) if h is not None else None
        if h is None or when is None:  # no header, or one whose date or time cannot be
            h = None
            stamp = _STAMP.fullmatch(line)
            stamped = _day_and_seconds(stamp) if stamp is not None else None
            if stamp is not None and stamped is not None:
                self.stamps.append((n + 1, *stamped, stamp["clock"]))
                return
        else:
            day, seconds = when
            self.header_line.append(n)
            self.header_day.append(day)
            self.header_s.append(seconds)
            self.header_clock.append(h["clock"])
            line = line[h.end():]
        if PROFILER_STEP_MARK in line:
            self.p.unreadable_steps += 1
        if not self._checkpoint_event(line, n, h is not None):
            if not self._activity_event(line, n, h is not None):
                self.pending_tflops = self._read_fact(line, n, self.pending_tflops)

    def _event(self, kind: str, n: int, m: re.Match[str], own: bool, timed: bool = True,
               **fields: Any) -> bool:
        self.pending.append(_Pending(kind, n, m.group(0), timed, own, fields))
        return True

    def _checkpoint_event(self, line: str, n: int, own: bool) -> bool:
        """The checkpoint event a line reports, if any (anchored at the last step line
        before it unless it names its step)."""
        if "heckpoint" not in line and "save" not in line and "Waited" not in line:
            return False
        for kind, pattern in (("checkpoint_save", _SAVE), ("checkpoint_saved", _SAVED),
                              ("checkpoint_async_start", _ASYNC)):
            if m := pattern.search(line):
                s = int(m.group(1))
                return self._event(kind, n, m, own, step=s, anchor_step=s)
        if m := _BG_START.search(line):
            return self._event("async_save_started", n, m, own)
        if m := _BG_DONE.search(line):
            return self._event("async_save_done", n, m, own,
                               seconds=float(m["seconds"]) if m["seconds"] else None)
        if m := _BLOCKING_SAVE.search(line):
            return self._event("async_save_blocking", n, m, own, seconds=float(m["seconds"]))
        if m := _WAIT_PREV.search(line):
            return self._event("checkpoint_wait_previous", n, m, own,
                               seconds=float(m.group(1)))
        if m := _WAIT_STEP.search(line):
            s = int(m.group(2))
            return self._event("checkpoint_wait_step", n, m, own, step=s,
                               seconds=float(m.group(1)), anchor_step=s)
        return False

    def _activity_event(self, line: str, n: int, own: bool) -> bool:
        """An eval, profiler, synchronous save, restore or restart line, if it is one;
        timed only by its own header."""
        if not _ACTIVITY_HINT.search(line):
            return False
        for kind, pattern in _ACTIVITY:
            if m := pattern.search(line):
                number = next((g for g in m.groups() if g is not None), None)
                step = seconds = None
                if number is not None and kind == "sync_save_end":
                    seconds = float(number)
                elif number is not None:
                    step = int(number)
                return self._event(kind, n, m, own, timed=False, step=step, seconds=seconds)
        return False

    def _read_fact(self, line: str, line_no: int, pending: bool) -> bool:
        """One line that is not a step: a fact about the run (parameters, versions, memory,
        TFLOPs per step, config) into ``p``. ``pending``: a per-step TFLOPs header was seen
        and its total is still to come; returns the new value."""
        p = self.p
        if m := _PARAMS.search(line):
            p.params = float(m.group(1)) * 1e9
            p.start_seen = True
        elif m := _JAX.search(line):
            p.env["jax"] = m.group(1)
            p.start_seen = True
        elif m := _JAXLIB.search(line):
            p.env["jaxlib"] = m.group(1)
        elif m := _BACKEND.search(line):
            p.env["backend"] = m.group(1).strip()
        elif m := _TOTAL_MEM.search(line):
            p.memory["compiled_total_gb"] = float(m.group(1))
            if mo := _OUTPUT_MEM.search(line):
                p.memory["compiled_output_gb"] = float(mo.group(1))
            if mt := _TEMP_MEM.search(line):
                p.memory["compiled_temp_gb"] = float(mt.group(1))
        elif m := _USING.search(line):
            used, limit = float(m.group(1)), float(m.group(2))
            if used >= p.memory.get("device_in_use_gb", -1.0):
                p.memory["device_in_use_gb"] = used
                p.memory["device_limit_gb"] = limit
        elif m := _TOTAL_TFLOPS_ONE_LINE.search(line):
            p.total_tflops_per_step = float(m.group(1))
        elif _PER_STEP.search(line):
            pending = True
            if mf := _TOTAL_TFLOPS.search(line):
                p.total_tflops_per_step = float(mf.group(1))
                pending = False
        elif pending and (m := _TOTAL_TFLOPS.search(line)):
            p.total_tflops_per_step = float(m.group(1))
            pending = False
        elif m := _CONFIG.search(line):
            p.config[m.group(1)] = _config_value(m.group(2))
            if line_no < self.first_step_line:
                self.started_by_config = True
        return pending


_SKELETON_DELETE = b"0123456789"
"""What a step line's shape is left with when these are deleted: its keys, separators,
dots, signs and header letters. Lines of one shape are read together."""

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

_HAS_DIGIT = re.compile(r"\d")

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
        if not key or _HAS_DIGIT.search(key):
            return None  # a key with a digit: lines of this shape may name another key
        f = field(offset + colon + 1, piece[colon + 1:])
        if f is None:
            return None
        values.append((key, f))
        offset += len(piece) + 1
    if "time_s" not in (_STEP_KEYS.get(key) for key, _ in values):
        return None  # no seconds: not a readable step, which the pattern read says
    return _Layout(_int_tokens(numeric), raw.count(b"."), step, values, header)


@dataclasses.dataclass
class _StepColumns:
    """Step lines read into numbers, in line order (a block's, or one shape's of it)."""

    number: np.ndarray
    """Step numbers; -1: unreadable."""
    has_loss: np.ndarray
    own: np.ndarray
    """Which lines hold an absl header before their mark."""
    day: np.ndarray
    secs: np.ndarray
    """The header's day number and seconds in the day (0 without one)."""
    decimals: np.ndarray
    """Decimals of the header's seconds, to write its clock back (-1: none shown, -2: the
    clock text is in ``clocks``)."""
    clocks: dict[int, str]
    cols: dict[str, np.ndarray]
    metrics: dict[str, np.ndarray]

    @classmethod
    def empty(cls, n: int) -> _StepColumns:
        return cls(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool),
                   np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n),
                   np.full(n, -2, dtype=np.int8), {}, {}, {})

    def put(self, idx: np.ndarray, part: _StepColumns) -> None:
        """``part`` (the lines at ``idx``) into these columns."""
        n = self.number.size
        for name in ("number", "has_loss", "own", "day", "secs", "decimals"):
            getattr(self, name)[idx] = getattr(part, name)
        for k, clock in part.clocks.items():
            self.clocks[int(idx[k])] = clock
        for mine, theirs in ((self.cols, part.cols), (self.metrics, part.metrics)):
            for key, col in theirs.items():
                mine.setdefault(key, np.full(n, math.nan))[idx] = col

    def clock(self, k: int) -> str:
        """The clock text of line ``k``'s header."""
        if self.decimals[k] == -2:
            return self.clocks[k]
        dec = int(self.decimals[k])
        t = float(self.secs[k])
        hh, rest = divmod(int(t), 3600)
        mm = rest // 60
        frac = max(0, dec)
        whole = round((t - hh * 3600 - mm * 60) * 10 ** frac)
        ss, part = divmod(whole, 10 ** frac)
        return f"{hh:02d}:{mm:02d}:{ss:02d}" + (f".{part:0{dec}d}" if dec >= 0 else "")

    @staticmethod
    def join(parts: Sequence[_StepColumns]) -> _StepColumns:
        """The columns of consecutive parts as one."""
        out = _StepColumns.empty(0)
        if not parts:
            return out
        for name in ("number", "has_loss", "own", "day", "secs", "decimals"):
            setattr(out, name, np.concatenate([getattr(p, name) for p in parts]))
        first = 0
        for p in parts:
            out.clocks.update((first + k, clock) for k, clock in p.clocks.items())
            first += p.number.size
        for name in ("cols", "metrics"):
            keys = list(dict.fromkeys(k for p in parts for k in getattr(p, name)))
            setattr(out, name, {key: np.concatenate([
                getattr(p, name).get(key, np.full(p.number.size, math.nan)) for p in parts])
                for key in keys})
        return out


_IS_DIGIT = np.zeros(256, dtype=bool)
_IS_DIGIT[48:58] = True
"""Which bytes are ASCII digits (looked up, one gather per test)."""


def _read_shaped(data: bytes, sample: str, n: int) -> _StepColumns | None:
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
    out = _StepColumns.empty(n)
    number = table[:, layout.step.token]
    if (number < 0).any():
        return None
    out.number = number.copy()
    for key, f in layout.values:
        x = _value(table, f)
        if x is None:
            return None
        name = _STEP_KEYS.get(key)
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
                  out: _StepColumns) -> bool:
    """The absl headers' days and times into ``out``; False when one is not a date and
    time of day."""
    md, hh, mm, ss = header
    month, dday = np.divmod(table[:, md.token], 100)
    hours, minutes = table[:, hh.token], table[:, mm.token]
    seconds = _value(table, ss)
    if seconds is None or not _valid_clock(month, dday, hours, minutes, seconds).all():
        return False
    out.own[:] = True
    out.day = ORDINAL_2000 + _DAYS_BEFORE_MONTH[month - 1] + dday
    out.secs = hours * 3600.0 + minutes * 60.0 + seconds
    out.decimals[:] = ss.decimals if ss.dot is not None else -1
    return True


def _read_by_pattern(lines: list[str]) -> _StepColumns:
    """Step lines read one shape of tail at a time after their mark, and their headers by
    pattern: the read for shapes ``_read_shaped`` does not take."""
    n = len(lines)
    parts = [raw.partition(STEP_MARK) for raw in lines]
    out = _StepColumns.empty(n)
    out.number, out.has_loss, out.cols, out.metrics = _read_fields([x[2] for x in parts])
    out.own, (out.day, out.secs), groups = _header_times([x[0] for x in parts])
    out.clocks = {k: groups[k][2] for k in np.flatnonzero(out.own).tolist()}
    return out


def _read_steps(lines: list[str]) -> _StepColumns:
    """A block's step lines read into numbers: lines of one shape (what is left of them
    without their digits) at once."""
    n = len(lines)
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    shapes = data.translate(None, _SKELETON_DELETE)
    first = shapes[:shapes.find(b"\n") + 1]
    if shapes == first * n:
        got = _read_shaped(data, lines[0], n)
        return got if got is not None else _read_by_pattern(lines)
    by_shape: dict[bytes, list[int]] = {}
    for k, shape in enumerate(shapes.split(b"\n")[:n]):
        by_shape.setdefault(shape, []).append(k)
    out = _StepColumns.empty(n)
    for members in by_shape.values():
        sub = [lines[k] for k in members]
        part = None
        if len(sub) > 1:
            part = _read_shaped(("\n".join(sub) + "\n").encode("utf-8", "surrogatepass"),
                                sub[0], len(sub))
        out.put(np.asarray(members), part if part is not None else _read_by_pattern(sub))
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
        if colon < 0 or not piece[:colon].strip() or _HAS_DIGIT.search(piece[:colon]):
            return None  # no key, or one with a digit: lines of this shape may name another
        keys.append(piece[:colon].strip())
        tokens.append("," + piece[:colon + 1])
    if "time_s" not in (_STEP_KEYS.get(key) for key in keys):
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
    number[k], fields = parsed
    has_loss[k] = "loss" in fields
    n = number.size
    for name, value in fields.items():
        if name == "metrics":
            for key, x in value.items():
                metrics.setdefault(key, np.full(n, math.nan))[k] = x
        else:
            cols.setdefault(name, np.full(n, math.nan))[k] = value


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
        name = _STEP_KEYS.get(key)
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
    ok &= _valid_clock(month, dday, d[:, 6] * 10 + d[:, 7], d[:, 9] * 10 + d[:, 10],
                       d[:, 12] * 10 + d[:, 13])
    day = ORDINAL_2000 + _DAYS_BEFORE_MONTH[np.clip(month, 1, 12) - 1] + dday
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


def _header_times(heads: list[str]) -> tuple[np.ndarray, np.ndarray,
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
    has = _valid_clock(month, dday, hours, minutes,
                       np.array([g[5] or "0" for g in found], dtype=np.float64))
    day = np.zeros(len(heads), dtype=np.int64)
    secs = np.zeros(len(heads))
    if has.any():
        sub = [found[k] for k in np.flatnonzero(has)]
        day[has] = ORDINAL_2000 + _DAYS_BEFORE_MONTH[month[has] - 1] + dday[has]
        secs[has] = (np.array([g[3] for g in sub], dtype=np.float64) * 3600.0
                     + np.array([g[4] for g in sub], dtype=np.float64) * 60.0
                     + np.array([g[5] for g in sub], dtype=np.float64))
    return has, np.stack([day, secs]), found


NEW_YEAR_DAYS = 180
"""A header dated at least this many days before the header above it (in line order) is
in the next year, one dated this many days after it back in the year before: an absl
header has no year, and a run over New Year's Eve goes from ``1231`` to ``0101``."""


def _new_years(step_line: np.ndarray, step_days: np.ndarray, other_line: np.ndarray,
               other_days: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The day numbers of the step lines' and the other lines' headers with a year added
    after each New Year's Eve the log crosses (``NEW_YEAR_DAYS``), so times never run
    backwards by a year. Days count in the leap year 2000 (``_DAYS_BEFORE_MONTH``), so a
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
    def of(cls, r: _Reader, read: _StepColumns, step_line: np.ndarray) -> _Headers:
        own = read.own
        every = bool(own.all())
        rows = None if every else np.flatnonzero(own)
        lines, days, secs = ((step_line, read.day, read.secs) if rows is None
                             else (step_line[rows], read.day[rows], read.secs[rows]))
        oline = np.asarray(r.header_line, dtype=np.int64)
        odays = np.asarray(r.header_day, dtype=np.int64)
        osecs = np.asarray(r.header_s, dtype=np.float64)
        days, odays = _new_years(lines, days, oline, odays)
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


def _finish(r: _Reader) -> None:
    """The step lines' numbers joined into ``r.p``'s steps, and the events made with their
    times (see ``_Reader``)."""
    p = r.p
    p.start_seen = p.start_seen or r.started_by_config
    read = _StepColumns.join(r.chunks)
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
    steps, take = _table(read.number, read.cols, read.metrics, step_line, p)
    p.steps, p.line_at = steps, line_at[take]
    p.has_loss, p.own_time = read.has_loss[take], read.own[take]


ZONE_STEP_S = 900
"""Time zones differ by whole quarters of an hour: the offset between a log viewer's
timestamps and the absl headers is rounded to it."""


def _stamp(r: _Reader, read: _StepColumns, step_line: np.ndarray) -> None:
    """Each line below a timestamp line (``_STAMP``) takes its time as its own header's,
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


def _zone_offset(r: _Reader, read: _StepColumns, rows: list[int]) -> float | None:
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


def _events(r: _Reader, headers: _Headers, read: _StepColumns,
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
        fields = dict(e.fields)
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


def parse_lines(lines: Iterable[str] | TextIO,
                progress: Callable[[int], None] | None = None) -> ParsedLog:
    """Read the lines that matter; ignore the rest.

    One pass; a file is read in blocks (``READ_BLOCK_CHARS``), any other iterable in
    batches of ``PROGRESS_EVERY_LINES`` lines; the step lines of each are read into numbers
    at once and no line's text is kept. ``progress(chars)`` hears of the characters read, a
    block or a batch at a time."""
    r = _Reader()
    n = 1
    if hasattr(lines, "read"):
        n = _read_file(r, lines, n, progress)  # type: ignore[arg-type]
    else:
        batch: list[str] = []
        chars = 0
        for raw in _physical_lines(lines):
            batch.append(raw)
            chars += len(raw) + 1
            if len(batch) == PROGRESS_EVERY_LINES:
                n = r.read(batch, n)
                batch = []
                if progress is not None:
                    progress(chars)
                    chars = 0
        if batch:
            n = r.read(batch, n)
        if progress is not None and chars:
            progress(chars)
    return _parsed(r, n)


def _parsed(r: _Reader, n: int) -> ParsedLog:
    """What ``r`` read, finished (``_finish``), its lines numbered up to ``n`` - 1."""
    _finish(r)
    r.p.lines = n - 1
    return r.p


HALVES_MIN_BYTES = 12 << 20
"""A plain log of at least this size (12 MiB, ~60,000 steps) is read in two halves at once
(``parse_file``). ``benchmarks/side_by_side.py`` on the quiet 2-core machine, halves
against one pass (median of 7 and of 11; logs read as bytes, ``_split_block``): 1.79x at 2
MB, 1.08x at 4 MB, 0.86-0.99x at 8-10 MB, 0.71-0.72x at 12 MB, 0.73-0.74x at 16 MB,
0.70-0.85x at 20 MB, 0.75-0.78x at 30-40 MB; a million steps (201 MiB) 0.73 s against
1.09 s (0.67x). From 12 MiB on it won every run."""


def parse_file(path: str | os.PathLike[str], progress: Progress = NO_PROGRESS,
               min_bytes: int | None = None) -> ParsedLog:
    """A log file read as ``parse_lines`` reads it, into the same ``ParsedLog``: a plain
    file of at least ``min_bytes`` (``HALVES_MIN_BYTES``) in two halves at once where a
    fork is safe (``forked.why_not_fork``), the second half's lines in a forked child, cut
    after the line end nearest past its middle. The child reads its step lines into
    numbers and its other lines into events, header times and facts; this process reads
    the first half, then joins the two (``_join_half``) as if it had read on. ``progress``
    hears of the bytes read."""
    limit = HALVES_MIN_BYTES if min_bytes is None else min_bytes
    with open_bytes(path) as stream:  # checked as open_text checks (missing, binary, gzip)
        cut = _half_way(path, limit)
        if cut is None:
            with progress.task(_reading(path), file_size(path), "B") as task:
                r = _Reader()
                return _parsed(r, _read_binary(r, stream, 1, task.advance))
    return _parse_in_halves(path, cut, progress)


def _reading(path: str | os.PathLike[str]) -> str:
    return f"reading {os.path.basename(str(path))}"


def _parse_in_halves(path: str | os.PathLike[str], cut: int, progress: Progress = NO_PROGRESS,
                     start: Callable[..., forked.Child] = forked.Child.run) -> ParsedLog:
    """``parse_file`` cut at byte ``cut`` (just after a line end); ``start`` runs the
    second half's read (a fork, ``forked.Child.run``), before any progress is shown (a
    progress bar's thread would make forking unsafe)."""
    child: forked.Child | None = None
    try:
        with forked.sigint_held():  # a Ctrl-C lands once ``child`` is set, so it is reaped
            child = start(str(path), _read_from, str(path), cut)
        with progress.task(_reading(path), file_size(path), "B") as task:
            r = _Reader()
            with open(path, "rb") as raw:
                n = _read_binary(r, io.BufferedReader(_Prefix(raw, cut)), 1, task.advance)
            half: _Half = child.result()
            task.advance(file_size(path) - cut)
    finally:
        if child is not None:
            child.reap()
    if r.pending_tflops:  # a total TFLOPs line of the first half's may follow: read on
        n = _read_on(r, path, cut, n)
    else:
        n = _join_half(r, half, n)
    return _parsed(r, n)


def _half_way(path: str | os.PathLike[str], min_bytes: int) -> int | None:
    """Where to cut a log into halves (the byte after the line end nearest past its
    middle), or None to read it in one pass: a fork is not safe here, the file is smaller
    than ``min_bytes``, gzip, or has no line end past its middle."""
    if forked.why_not_fork() is not None:
        return None
    size = file_size(path)
    if size < max(min_bytes, 2):
        return None
    with open(path, "rb") as raw:
        if raw.read(2) == GZIP_MAGIC:
            return None
        raw.seek(size // 2)
        while chunk := raw.read(1 << 16):
            at = chunk.find(b"\n")
            if at >= 0:
                cut = raw.tell() - len(chunk) + at + 1
                return cut if cut < size else None
    return None


class _Prefix(io.RawIOBase):
    """The first ``size`` bytes of a binary file, as a stream of its own."""

    def __init__(self, raw: io.BufferedReader, size: int) -> None:
        self.raw, self.left = raw, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.left <= 0:
            return 0
        got = self.raw.readinto(memoryview(buffer)[:min(len(buffer), self.left)])
        self.left -= got or 0
        return got or 0


@dataclasses.dataclass
class _Half:
    """What the child read of a log's second half (``_read_from``), its lines numbered
    from 1: the reader's state, to be joined to the first half's (``_join_half``)."""

    reader: _Reader
    lines: int


def _read_file(r: _Reader, f: TextIO, n: int,
               progress: Callable[[int], None] | None = None) -> int:
    """Read an open text file into ``r``, a block at a time, its lines numbered from
    ``n``; returns the next line number."""
    for block in _file_lines(f, progress):
        n = r.read(block, n)
    return n


def _read_binary(r: _Reader, stream: BinaryIO, n: int,
                 progress: Callable[[int], None] | None = None) -> int:
    """Read a log's byte stream into ``r``, a block at a time (``_Reader.read_block``), its
    lines numbered from ``n``; returns the next line number."""
    for block in _byte_blocks(stream, progress):
        n = r.read_block(block, n)
    return n


def _read_on(r: _Reader, path: str | os.PathLike[str], cut: int, n: int) -> int:
    """Read the lines of ``path`` from byte ``cut`` on into ``r``, numbered from ``n``;
    returns the next line number."""
    with open(path, "rb") as raw:
        raw.seek(cut)
        return _read_binary(r, raw, n)


def _read_from(path: str, cut: int) -> _Half:
    """The lines of ``path`` from byte ``cut`` on, read as ``parse_lines`` reads a file."""
    r = _Reader()
    return _Half(r, _read_on(r, path, cut, 1) - 1)


def _join_half(r: _Reader, half: _Half, n: int) -> int:
    """Join what the child read of the second half (``half``) to ``r``, the first half's
    reader, as if ``r`` had read on from line ``n``; returns the next line number. Each
    fact is joined the way reading on would have set it: a later value wins, the largest
    device memory in use (a later tie wins), counts add up, and a ``Config param`` line
    shows the run starting only where no step line came before it."""
    h, offset = half.reader, n - 1
    if r.first_step_line == math.inf:
        r.started_by_config = r.started_by_config or h.started_by_config
        r.first_step_line = h.first_step_line + offset
    r.chunks += h.chunks
    r.chunk_lines += [lines + offset for lines in h.chunk_lines]
    r.pending += [dataclasses.replace(e, line=e.line + offset) for e in h.pending]
    r.header_line += [line + offset for line in h.header_line]
    r.header_day += h.header_day
    r.header_s += h.header_s
    r.header_clock += h.header_clock
    r.stamps += [(line + offset, day, seconds, clock) for line, day, seconds, clock in h.stamps]
    p, q = r.p, h.p
    p.start_seen = p.start_seen or q.start_seen
    p.env.update(q.env)
    p.config.update(q.config)
    p.params = q.params if q.params is not None else p.params
    p.total_tflops_per_step = (q.total_tflops_per_step if q.total_tflops_per_step is not None
                               else p.total_tflops_per_step)
    p.unreadable_steps += q.unreadable_steps
    in_use = q.memory.get("device_in_use_gb")
    if in_use is not None and in_use >= p.memory.get("device_in_use_gb", -1.0):
        p.memory.update(q.memory)
    else:
        p.memory.update({k: v for k, v in q.memory.items()
                         if k not in ("device_in_use_gb", "device_limit_gb")})
    r.pending_tflops = h.pending_tflops
    return n + half.lines


def import_lines(lines: Iterable[str], source: str,
                 progress: Callable[[int], None] | None = None) -> ImportedRun:
    """Parse a MaxText training log (any iterable of lines, e.g. an open file) into an
    ``ImportedRun``. ``progress`` as in ``parse_lines``."""
    return imported(parse_lines(lines, progress), source)


def imported(p: ParsedLog, source: str) -> ImportedRun:
    """The ``ImportedRun`` of a parsed log, or a LogFormatError when it has no step."""
    if not len(p.steps):
        raise LogFormatError(
            f"{source} has no 'completed step: N, seconds: ...' lines; is it a MaxText "
            "training log?"
        )
    return summarize(p, source)


def import_log(path: str | os.PathLike[str], progress: Progress = NO_PROGRESS,
               to_save: bool = False) -> ImportedRun:
    """Read and parse a MaxText training log file (plain or gzip), streaming it line by
    line. ``to_save``: the record will be written, so its step columns are compressed on
    another thread (``compress_ahead``) while the steps are analysed, and its steady step
    times while it is reported."""
    p = parse_file(path, progress)
    if to_save:
        compress_ahead(p.steps.per_step_arrays())
    run = imported(p, str(path))
    if to_save:
        compress_ahead([np.asarray(run.step_time.samples_s)])
    return run
