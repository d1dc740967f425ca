"""MaxText training logs read into ``analysis.maxtext.ParsedLog`` (``pipecheck import``).

Only the lines that matter are read; everything else is ignored. Lines carry an absl
header (``I1122 10:23:54.123456 140234567 train.py:512] ...``: level, date, time, thread
id, source) or none (``print`` output), may have a prefix before it (``# `` in a script's
comments, a pod name), end in ``\\n`` or ``\\r\\n``, and are interleaved with lines of other
threads and processes; so every pattern is searched for anywhere in a line and nothing
depends on two lines being adjacent, except ``Per train step:``, whose ``Total TFLOPs``
arrives on a later line. A checkpoint line without a header takes the time of the last
header before it; a bare step line, the time of the next one (the step interval needs a
time it was written by, not after). Other events (eval, profiler windows, synchronous
saves, restores, restarts) are timed only by their own header; without one they are
placed by line order.

Step lines are collected in the pass and read in bulk afterwards (``_read_steps``): lines
of one shape (the same keys in the same order, told apart by the line with its digits
removed) are matched by one regular expression over their joined text and their numbers
converted by numpy, so a million-step log costs a few passes in C, not a million dicts.
A step line without a readable ``seconds:`` is skipped and counted (``unreadable_steps``),
as is a ``completed profiler activation/deactivation step`` line (MaxText hides those
steps' times; the step is kept as a profiler event instead).
"""

from __future__ import annotations

import datetime
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from pipecheck.analysis.maxtext import ParsedLog, summarize
from pipecheck.errors import LogFormatError
from pipecheck.logs.text import file_size, open_text
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.imported import ImportedRun, LogEvent, LogStep
from pipecheck.records.steps import StepTable

# --- line patterns ---------------------------------------------------------------------
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
GLOG_HEADER = re.compile(
    r"[IWEF](?P<month>\d{2})(?P<day>\d{2}) (?P<clock>(?P<h>\d{2}):(?P<m>\d{2}):"
    r"(?P<s>\d{2}(?:\.\d+)?))\s+(?P<thread>\d+)\s+[^\s:\]]+:\d+\]\s?")
STEP_MARK = "completed step:"
PROFILER_STEP_MARK = "completed profiler activation/deactivation step:"
_STEP = re.compile(r"completed step:\s*(\d+)\s*,(.*)")
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
)
_ACTIVITY_HINT = re.compile(
    r"evaluation|eval |Completed eval|profil|Capture range|nsys-rep|qdstrm|\[sync\]|"
    r"Saving item|synchronous save|saving checkpoint|[Rr]estor|Slice down|Elastic attempt|"
    r"reemption")
"""A cheap test a line must pass before the ``_ACTIVITY`` patterns are tried."""

_STEP_KEYS = {
    "seconds": "time_s",
    "TFLOP/s/device": "tflops_per_s_per_device",
    "Tokens/s/device": "tokens_per_s_per_device",
    "loss": "loss",
}

_NO_DIGITS = str.maketrans("", "", "0123456789.")
"""Deleting these from a step line leaves its shape: lines of one shape have the same keys
in the same order."""

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
    """Split what a file iterator yields the way ``str.splitlines`` splits the whole text,
    so line numbers do not depend on whether the log was streamed or read at once."""
    for chunk in lines:
        yield from (chunk.splitlines() or [""])


def _day_and_seconds(m: re.Match[str]) -> tuple[int, float]:
    """An absl header's date (a day number) and time of day in seconds. The year is not
    logged: a run that crosses New Year's Eve is not supported."""
    day = datetime.date(2000, int(m["month"]), int(m["day"])).toordinal()
    return day, int(m["h"]) * 3600.0 + int(m["m"]) * 60.0 + float(m["s"])


class _Reader:
    """The state of one pass over a log's lines."""

    def __init__(self) -> None:
        self.p = ParsedLog()
        self.step_lines: list[str] = []
        self.step_line_no: list[int] = []
        self.origin: tuple[int, float] | None = None
        self.at: float | None = None
        self.clock: str | None = None
        self.last_step: int | None = None  # the last step line's number, as written
        self.steps_before = 0  # step lines read so far
        self.pending_tflops = False
        self.unstamped_from: int | None = None  # first step line with no header yet timed
        self.line_at_raw: list[float] = []  # per step line, in file order
        self.own_time: list[bool] = []  # the step line has its own header

    def stamp(self, h: re.Match[str]) -> float:
        day, seconds = _day_and_seconds(h)
        self.origin = (day, seconds) if self.origin is None else self.origin
        # days and seconds apart, rounded to the microseconds the log prints
        self.at = round((day - self.origin[0]) * 86400.0 + (seconds - self.origin[1]), 6)
        self.clock = h["clock"]
        return self.at

    def step_line(self, raw: str, n: int) -> None:
        i = raw.find(STEP_MARK)
        head = raw[:i]
        h = GLOG_HEADER.search(head) if "]" in head else None
        k = len(self.step_lines)
        if h is not None:
            at = self.stamp(h)
            self._time_unstamped(at)
        elif self.unstamped_from is None:
            self.unstamped_from = k
        self.step_lines.append(raw[i + len(STEP_MARK):])
        self.step_line_no.append(n)
        self.line_at_raw.append(self.at if h is not None and self.at is not None
                                else math.nan)
        self.own_time.append(h is not None)
        self.steps_before += 1
        m = re.match(r"\s*(\d+)", raw[i + len(STEP_MARK):])
        if m:
            self.last_step = int(m.group(1))

    def _time_unstamped(self, at: float) -> None:
        if self.unstamped_from is not None:
            for k in range(self.unstamped_from, len(self.step_lines)):
                if math.isnan(self.line_at_raw[k]):
                    self.line_at_raw[k] = at
            self.unstamped_from = None

    def other_line(self, raw: str, n: int) -> None:
        line = raw.rstrip("\r\n")
        h = GLOG_HEADER.search(line)
        if h is not None:
            self._time_unstamped(self.stamp(h))
            line = line[h.end():]
        if PROFILER_STEP_MARK in line:
            self.p.unreadable_steps += 1
        if event := self._checkpoint_event(line, n):
            self.p.events.append(event)
        elif event := self._activity_event(line, n, h is not None):
            self.p.events.append(event)
        else:
            self.pending_tflops = self._read_fact(line, self.pending_tflops)

    def _event(self, kind: str, n: int, m: re.Match[str], timed: bool = True,
               **fields: Any) -> LogEvent:
        return LogEvent(kind, n, m.group(0), at_s=self.at if timed else None,
                        clock=self.clock if timed else None,
                        **fields)

    def _checkpoint_event(self, line: str, n: int) -> LogEvent | None:
        """The checkpoint event a line reports, if any."""
        if "heckpoint" not in line and "save" not in line and "Waited" not in line:
            return None
        for kind, pattern in (("checkpoint_save", _SAVE), ("checkpoint_saved", _SAVED),
                              ("checkpoint_async_start", _ASYNC)):
            if m := pattern.search(line):
                s = int(m.group(1))
                return self._event(kind, n, m, step=s, anchor_step=s)
        last = self.last_step
        if m := _BG_START.search(line):
            return self._event("async_save_started", n, m, anchor_step=last)
        if m := _BG_DONE.search(line):
            return self._event("async_save_done", n, m,
                               seconds=float(m["seconds"]) if m["seconds"] else None,
                               anchor_step=last)
        if m := _BLOCKING_SAVE.search(line):
            return self._event("async_save_blocking", n, m, seconds=float(m["seconds"]),
                               anchor_step=last)
        if m := _WAIT_PREV.search(line):
            return self._event("checkpoint_wait_previous", n, m, seconds=float(m.group(1)),
                               anchor_step=last)
        if m := _WAIT_STEP.search(line):
            s = int(m.group(2))
            return self._event("checkpoint_wait_step", n, m, step=s,
                               seconds=float(m.group(1)), anchor_step=s)
        return None

    def _activity_event(self, line: str, n: int, stamped: bool) -> LogEvent | None:
        """An eval, profiler, synchronous save, restore or restart line, if it is one;
        timed only by its own header."""
        if not _ACTIVITY_HINT.search(line):
            return None
        for kind, pattern in _ACTIVITY:
            if m := pattern.search(line):
                number = next((g for g in m.groups() if g is not None), None)
                step = seconds = None
                if number is not None and kind == "sync_save_end":
                    seconds = float(number)
                elif number is not None:
                    step = int(number)
                return self._event(kind, n, m, timed=stamped, step=step, seconds=seconds,
                                   anchor_step=self.last_step)
        return None

    def _read_fact(self, line: str, pending: bool) -> bool:
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
            if not self.step_lines:
                p.start_seen = True
        return pending


def _shape_pattern(sample: str) -> re.Pattern[str] | None:
    """A pattern matching every step line of ``sample``'s shape, one group per number
    (the step, then each ``key: value``), or None for a line it cannot be built from."""
    m = re.match(r"\s*\d+\s*,(.*)$", sample)
    if m is None:
        return None
    parts = [r"^\s*(\d+)\s*"]
    for piece in m.group(1).split(","):
        key, sep, _ = piece.partition(":")
        if not sep or not key.strip():
            return None
        parts.append(r",\s*" + re.escape(key.strip()) + r":\s*([^,\n]*?)\s*")
    return re.compile("".join(parts) + r"$", re.M)


READ_CHUNK_LINES = 65536
"""Step lines of one shape matched at a time: their joined text and the matches stay a
few megabytes however long the log."""


def _read_group(texts: list[str]) -> tuple[list[str], np.ndarray, list[np.ndarray]] | None:
    """The keys, step numbers and value columns of step lines of one shape, read in
    chunks of ``READ_CHUNK_LINES``; None when they are not all plain numbers (read one by
    one then)."""
    pattern = _shape_pattern(texts[0])
    if pattern is None:
        return None
    keys = [piece.partition(":")[0].strip() for piece in texts[0].split(",")[1:]]
    numbers: list[np.ndarray] = []
    columns: list[list[np.ndarray]] = [[] for _ in keys]
    for lo in range(0, len(texts), READ_CHUNK_LINES):
        chunk = texts[lo:lo + READ_CHUNK_LINES]
        found = pattern.findall("\n".join(t.rstrip("\r\n") for t in chunk))
        if len(found) != len(chunk):
            return None
        fields = list(zip(*found, strict=True)) if keys else [found]
        try:
            numbers.append(np.array(fields[0]).astype(np.int64))
            for j in range(len(keys)):
                columns[j].append(np.array(fields[j + 1]).astype(np.float64))
        except ValueError:
            return None
    return keys, np.concatenate(numbers), [np.concatenate(c) for c in columns]


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


def _read_steps(texts: list[str], line_no: list[int], line_at: list[float]
                ) -> tuple[StepTable[LogStep], np.ndarray, np.ndarray, int, int, np.ndarray]:
    """The step lines read in bulk (see the module docstring): the steps in step order
    (the first line of a repeated step kept), when each line was written, which lines
    carry a loss, how many lines were unreadable and how many repeated a step, and the
    lines kept (their positions among the step lines)."""
    n = len(texts)
    has_loss = np.zeros(n, dtype=bool)
    number = np.full(n, -1, dtype=np.int64)
    time_s = np.full(n, math.nan)
    cols: dict[str, np.ndarray] = {}
    metrics: dict[str, np.ndarray] = {}
    groups: dict[str, list[int]] = {}
    for k, t in enumerate(texts):
        groups.setdefault(t.translate(_NO_DIGITS), []).append(k)
    for rows in groups.values():
        texts_of = [texts[k] for k in rows]
        got = _read_group(texts_of) if len(rows) > 1 else None
        idx = np.asarray(rows, dtype=np.int64)
        if got is not None:
            keys, numbers, columns = got
            number[idx] = numbers
            has_loss[idx] = "loss" in keys
            seen: set[str] = set()
            for key, col in zip(keys, columns, strict=True):
                if key in seen:
                    continue  # the first value of a repeated key counts, as one by one
                seen.add(key)
                name = _STEP_KEYS.get(key)
                target = cols if name is not None else metrics
                dest = target.setdefault(name or key, np.full(n, math.nan))
                dest[idx] = col
            continue
        for k, text in zip(rows, texts_of, strict=True):
            _read_one(k, text, number, has_loss, cols, metrics)
    time_s = cols.pop("time_s", time_s)
    readable = (number >= 0) & ~np.isnan(time_s)
    unreadable = int(n - readable.sum())
    keep = np.flatnonzero(readable)
    # the first line of each step, in step order (a log's lines can come out of order)
    order = keep[np.argsort(number[keep], kind="stable")]
    first = np.ones(order.size, dtype=bool)
    first[1:] = number[order][1:] != number[order][:-1]
    duplicates = int(order.size - first.sum())
    order = order[first]
    table_columns = {"step": number[order], "time_s": time_s[order],
                     "line": np.asarray(line_no, dtype=np.int64)[order]}
    table_columns.update({name: col[order] for name, col in cols.items()})
    maps = {"metrics": {key: col[order] for key, col in metrics.items()
                        if not np.isnan(col[order]).all()}}
    table = StepTable(LogStep, order.size, table_columns, maps=maps)
    return (table, np.asarray(line_at, dtype=np.float64)[order], has_loss[order], unreadable,
            duplicates, order)


def parse_lines(lines: Iterable[str], progress: Callable[[int], None] | None = None
                ) -> ParsedLog:
    """Read the lines that matter; ignore the rest.

    One pass, one line in memory at a time besides the step lines' text (read in bulk at
    the end, ``_read_steps``). ``progress(chars)`` is called every ``PROGRESS_EVERY_LINES``
    lines with the characters read since the last call."""
    r = _Reader()
    chars = 0
    n = 0
    for n, raw in enumerate(_physical_lines(lines), start=1):
        if progress is not None:
            chars += len(raw) + 1
            if n % PROGRESS_EVERY_LINES == 0:
                progress(chars)
                chars = 0
        if STEP_MARK in raw:
            r.step_line(raw, n)
        else:
            r.other_line(raw, n)
    if progress is not None and chars:
        progress(chars)
    p = r.p
    steps, line_at, has_loss, unreadable, duplicates, order = _read_steps(
        r.step_lines, r.step_line_no, r.line_at_raw)
    p.steps, p.line_at, p.has_loss = steps, line_at, has_loss
    p.own_time = np.asarray(r.own_time, dtype=bool)[order]
    p.unreadable_steps += unreadable
    p.duplicates = duplicates
    p.lines = n
    return p


def import_lines(lines: Iterable[str], source: str,
                 progress: Callable[[int], None] | None = None) -> ImportedRun:
    """Parse a MaxText training log (any iterable of lines, e.g. an open file) into an
    ``ImportedRun``. ``progress`` as in ``parse_lines``."""
    p = parse_lines(lines, progress)
    if not len(p.steps):
        raise LogFormatError(
            f"{source} has no 'completed step: N, seconds: ...' lines; is it a MaxText "
            "training log?"
        )
    return summarize(p, source)


def import_log(path: str | os.PathLike[str], progress: Progress = NO_PROGRESS) -> ImportedRun:
    """Read and parse a MaxText training log file (plain or gzip), streaming it line by
    line."""
    with open_text(path) as f, progress.task(f"reading {os.path.basename(str(path))}",
                                             file_size(path), "B") as task:
        return import_lines(f, source=str(path), progress=task.advance)
