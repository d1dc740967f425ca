"""A log file read in one pass, or (a long plain one, where a fork is safe) in two halves
at once, the second in a forked child, then joined as if one reader had read on."""

from __future__ import annotations

import dataclasses
import io
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipecheck.analysis.logs.maxtext import ParsedLog
from pipecheck.logs import forked
from pipecheck.logs.maxtext.finish import parsed
from pipecheck.logs.maxtext.reader import Reader, read_binary
from pipecheck.logs.text import GZIP_MAGIC, file_size, open_bytes
from pipecheck.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

HALVES_MIN_BYTES = 12 << 20
"""A plain log of at least this size (12 MiB, ~60,000 steps) is read in two halves at once
(``parse_file``). ``benchmarks/side_by_side.py`` on the quiet 2-core machine, halves
against one pass (median of 7 and of 11; logs read as bytes, ``split_block``): 1.79x at 2
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
        cut = half_way(path, limit)
        if cut is None:
            with progress.task(_reading(path), file_size(path), "B") as task:
                r = Reader()
                return parsed(r, read_binary(r, stream, 1, task.advance))
    return parse_in_halves(path, cut, progress)


def _reading(path: str | os.PathLike[str]) -> str:
    return f"reading {os.path.basename(str(path))}"


def parse_in_halves(path: str | os.PathLike[str], cut: int, progress: Progress = NO_PROGRESS,
                    start: Callable[..., forked.Child] | None = None) -> ParsedLog:
    """``parse_file`` cut at byte ``cut`` (just after a line end); ``start`` runs the
    second half's read (None: a fork, ``forked.Child.run`` as it is when called, so a
    wrapper put in its place is used), before any progress is shown (a progress bar's
    thread would make forking unsafe)."""
    run_child = forked.Child.run if start is None else start
    child: forked.Child | None = None
    try:
        with forked.sigint_held():  # a Ctrl-C lands once ``child`` is set, so it is reaped
            child = run_child(str(path), _read_from, str(path), cut)
        with progress.task(_reading(path), file_size(path), "B") as task:
            r = Reader()
            with open(path, "rb") as raw:
                n = read_binary(r, io.BufferedReader(_Prefix(raw, cut)), 1, task.advance)
            half: _Half = child.result()
            task.advance(file_size(path) - cut)
    finally:
        if child is not None:
            child.reap()
    if r.pending_tflops:  # a total TFLOPs line of the first half's may follow: read on
        n = _read_on(r, path, cut, n)
    else:
        n = _join_half(r, half, n)
    return parsed(r, n)


def half_way(path: str | os.PathLike[str], min_bytes: int) -> int | None:
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

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self.left <= 0:
            return 0
        view = memoryview(buffer)
        got = self.raw.readinto(view[:min(len(view), self.left)])
        self.left -= got or 0
        return got or 0


@dataclasses.dataclass
class _Half:
    """What the child read of a log's second half (``_read_from``), its lines numbered
    from 1: the reader's state, to be joined to the first half's (``_join_half``)."""

    reader: Reader
    lines: int


def _read_on(r: Reader, path: str | os.PathLike[str], cut: int, n: int) -> int:
    """Read the lines of ``path`` from byte ``cut`` on into ``r``, numbered from ``n``;
    returns the next line number."""
    with open(path, "rb") as raw:
        raw.seek(cut)
        return read_binary(r, raw, n)


def _read_from(path: str, cut: int) -> _Half:
    """The lines of ``path`` from byte ``cut`` on, read as ``parse_lines`` reads a file."""
    r = Reader()
    return _Half(r, _read_on(r, path, cut, 1) - 1)


def _join_half(r: Reader, half: _Half, n: int) -> int:
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
