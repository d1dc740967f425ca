"""One pass over a log's lines (``Reader``): step lines read in bulk a block at a time,
the other lines one by one into events, header times and facts about the run."""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Callable
from typing import BinaryIO, TextIO

import numpy as np

from pipecheck.analysis.logs.maxtext import ParsedLog
from pipecheck.logs.maxtext.blocks import byte_blocks, file_lines, split_block
from pipecheck.logs.maxtext.clock import day_and_seconds
from pipecheck.logs.maxtext.columns import StepColumns
from pipecheck.logs.maxtext.events import Pending, activity_event, checkpoint_event
from pipecheck.logs.maxtext.patterns import GLOG_HEADER, NUM, PROFILER_STEP_MARK, STAMP, STEP_MARK
from pipecheck.logs.maxtext.shaped import read_shaped
from pipecheck.logs.maxtext.steps import read_steps

_PARAMS = re.compile(rf"number parameters:\s*({NUM})\s*billion")
_JAX = re.compile(r"System Information: Jax Version:\s*(\S+)")
_JAXLIB = re.compile(r"System Information: Jaxlib Version:\s*(\S+)")
_BACKEND = re.compile(r"System Information: Jax Backend:\s*(.*\S)")
_TOTAL_MEM = re.compile(rf"Total memory size:\s*({NUM})\s*GB")
_OUTPUT_MEM = re.compile(rf"Output size:\s*({NUM})\s*GB")
_TEMP_MEM = re.compile(rf"Temp size:\s*({NUM})\s*GB")
_USING = re.compile(rf"Using \(GB\)\s*({NUM})\s*/\s*({NUM})")


_PER_STEP = re.compile(r"Per train step:")
_TOTAL_TFLOPS = re.compile(rf"Total TFLOPs:\s*({NUM})")
# MaxText before mid-2024 wrote the total on one line: "Per train step, total TFLOPs will
# be 1033.20, split as 96.17% learnable weight flops and 3.83% attention flops"
_TOTAL_TFLOPS_ONE_LINE = re.compile(rf"Per train step, total TFLOPs will be\s*({NUM})")
_CONFIG = re.compile(r"Config param\s+(\w+):\s*(.*?)\s*$")


def _config_value(text: str) -> bool | int | float | str:
    if text in ("True", "False"):
        return text == "True"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


class Reader:
    """The state of one pass over a log's lines. Step lines are read in bulk a block at a
    time (``read_steps``) into numbers; the other lines one by one. The times of the
    events and of bare step lines (the next header's) are set at the end (``finish``)."""

    def __init__(self) -> None:
        self.p = ParsedLog()
        self.chunks: list[StepColumns] = []
        self.chunk_lines: list[np.ndarray] = []
        self.first_step_line: float = math.inf
        self.pending: list[Pending] = []
        self.header_line: list[int] = []  # other lines with a header: line, day, seconds
        self.header_day: list[int] = []
        self.header_s: list[float] = []
        self.header_clock: list[str] = []
        self.pending_tflops = False
        self.stamps: list[tuple[int, int, float, str]] = []
        """Lines timed by a timestamp line above them (``STAMP``): line, day, seconds,
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
            self.chunks.append(read_steps(list(itertools.compress(lines, flags))))
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
        shape and a few other lines (``split_block``) is read without splitting its step
        lines apart."""
        split = split_block(block)
        if split is None:
            return self.read(block.decode("utf-8", "replace").splitlines() or [""], first)
        if split.step_at.size:
            self.first_step_line = min(self.first_step_line, first + int(split.step_at[0]))
            read = read_shaped(split.steps, split.sample, split.step_at.size)
            self.chunks.append(read if read is not None else read_steps(
                split.steps.decode("ascii").splitlines()))
            self.chunk_lines.append(split.step_at + first)
        for k, line in split.others:
            self.other_line(line, first + k)
        return first + split.lines

    def other_line(self, raw: str, n: int) -> None:
        line = raw.rstrip("\r\n")
        h = GLOG_HEADER.search(line)
        when = day_and_seconds(h) if h is not None else None
        if h is None or when is None:  # no header, or one whose date or time cannot be
            h = None
            stamp = STAMP.fullmatch(line)
            stamped = day_and_seconds(stamp) if stamp is not None else None
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
        own = h is not None
        event = checkpoint_event(line, n, own) or activity_event(line, n, own)
        if event is not None:
            self.pending.append(event)
        else:
            self.pending_tflops = self._read_fact(line, n, self.pending_tflops)

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


def read_file(r: Reader, f: TextIO, n: int,
               progress: Callable[[int], None] | None = None) -> int:
    """Read an open text file into ``r``, a block at a time, its lines numbered from
    ``n``; returns the next line number."""
    for block in file_lines(f, progress):
        n = r.read(block, n)
    return n


def read_binary(r: Reader, stream: BinaryIO, n: int,
                 progress: Callable[[int], None] | None = None) -> int:
    """Read a log's byte stream into ``r``, a block at a time (``Reader.read_block``), its
    lines numbered from ``n``; returns the next line number."""
    for block in byte_blocks(stream, progress):
        n = r.read_block(block, n)
    return n
