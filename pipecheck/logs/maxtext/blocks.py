"""A log's bytes and lines a block at a time, and a block of bytes taken apart into its
step lines (all of one shape, kept as one text) and its other lines (``split_block``)."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, TextIO

import numpy as np

from pipecheck.logs.maxtext.patterns import SKELETON_DELETE, STEP_MARK


def physical_lines(lines: Iterable[str]) -> Iterator[str]:
    """Split what an iterable of lines yields the way ``str.splitlines`` splits the whole
    text, so line numbers do not depend on how the log was handed over."""
    for chunk in lines:
        yield from (chunk.splitlines() or [""])


READ_BLOCK_CHARS = 1 << 22
"""Characters read from a file at a time: its lines are split in C, a block at a time."""


def file_lines(f: TextIO, progress: Callable[[int], None] | None) -> Iterator[list[str]]:
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


def byte_blocks(stream: BinaryIO, progress: Callable[[int], None] | None
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
class SplitBlock:
    """A block of whole lines taken apart without splitting its step lines
    (``split_block``)."""

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


def split_block(block: bytes) -> SplitBlock | None:
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
    shape = block[start:end].translate(None, SKELETON_DELETE)
    shapes = block.translate(None, SKELETON_DELETE)
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
        return SplitBlock(lines, block, sample, step_at, [])
    line_ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10) + 1
    starts, ends = np.concatenate(([0], line_ends[:-1]))[at], line_ends[at]
    other_text = b"\n".join([block[a:b - 1] for a, b in zip(starts.tolist(), ends.tolist(),
                                                           strict=True)])
    if _STEP_MARK_BYTES in other_text or _ASCII_BREAKS.search(other_text):
        return None  # a step line of another shape, or a line break inside a line
    others = list(zip(at.tolist(), other_text.decode("ascii").split("\n"), strict=True))
    return SplitBlock(lines, _cut_out(block, starts, ends), sample, step_at, others)


def _cut_out(data: bytes, starts: np.ndarray, ends: np.ndarray) -> bytes:
    """``data`` without its spans ``starts[i]:ends[i]`` (in order, not overlapping)."""
    if not starts.size:
        return data
    spans = itertools.chain.from_iterable(zip(starts.tolist(), ends.tolist(), strict=True))
    keep = [0, *spans, len(data)]
    return b"".join(data[keep[i]:keep[i + 1]] for i in range(0, len(keep), 2))
