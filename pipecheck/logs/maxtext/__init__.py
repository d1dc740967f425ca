"""MaxText training logs read into ``analysis.logs.maxtext.ParsedLog`` (``pipecheck import``).

Only the lines that matter are read; everything else is ignored. Lines carry an absl
header (``I1122 10:23:54.123456 140234567 train.py:512] ...``: level, date, time, thread
id, source) or none (``print`` output), may have a prefix before it (``# `` in a script's
comments, a pod name), end in ``\\n`` or ``\\r\\n``, and are interleaved with lines of other
threads and processes; so every pattern is searched for anywhere in a line and nothing
depends on two lines being adjacent, except ``Per train step:``, whose ``Total TFLOPs``
arrives on a later line, and a log viewer's timestamp line (a date and time alone, which
Cloud Logging writes above each entry: ``patterns.STAMP``), which times the line below it
as that line's own header would (on the absl headers' clock: ``finish``). A checkpoint line
without a header takes the time of the last header before it; a bare step line, the time
of the next one (the step interval needs a time it was written by, not after). Other
events (eval, profiler windows, synchronous saves, restores, restarts) are timed only by
their own header; without one they are placed by line order.

A log file is read as bytes, a block at a time (``reader.Reader.read_block``). The usual
block, step lines of one shape among a few other lines, is taken apart without splitting
its step lines (``blocks.split_block``); any other block (non-ASCII, a line break other
than ``\n``, several shapes) is decoded and split as ``str.splitlines`` splits it; either
way the lines are numbered and read alike (tested).

Step lines are read in bulk, a block of lines at a time (``steps.read_steps``): the lines
of one shape (what is left of a line without its digits: the same keys, separators, dots
and header) are translated to integers that numpy reads at once, the shape's first line
says which integer is which and how many decimals each value has (checked on every line),
so a million-step log costs a few passes in C, not a million dicts. A shape this read does
not take (``nan``, a sign that is not a number's) is read by pattern, a tail and a header
at a time: each tail by its keys, each header by the absl pattern
(``by_pattern.read_by_pattern``); the two reads agree (tested), so a line reads the same
whichever lines it is read with, but for one thing: an absl header with a digit too few or
too many in a field (``I101``, ``1:00:00``), which absl never writes, has the shape of a
real one and is read as one where it is read with real ones (the pattern read takes none
such). A header whose date or time cannot be (month 13, minute 60) is read as no header by
every read.
A step line without a readable ``seconds:`` is skipped and counted (``unreadable_steps``),
as is a ``completed profiler activation/deactivation step`` line (MaxText hides those
steps' times; the step is kept as a profiler event instead).

The package's modules, one idea each: ``patterns`` (the grammar the readers share),
``blocks`` (a file's bytes a block at a time, a block taken apart), ``clock`` (absl
headers' dates and times), ``columns``, ``shaped``, ``by_pattern`` and ``steps`` (step
lines into numbers: in bulk, by pattern, which of the two), ``events`` (event lines),
``reader`` (one pass over the lines), ``finish`` (a pass's read put on one clock and
into a ``ParsedLog``), ``halves`` (a file in one pass or in two halves at once).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TextIO

import numpy as np

from pipecheck.analysis.logs.maxtext import ParsedLog, summarize
from pipecheck.errors import LogFormatError
from pipecheck.logs.maxtext.blocks import physical_lines
from pipecheck.logs.maxtext.finish import parsed
from pipecheck.logs.maxtext.halves import HALVES_MIN_BYTES, parse_file
from pipecheck.logs.maxtext.patterns import GLOG_HEADER, PROFILER_STEP_MARK, STEP_MARK
from pipecheck.logs.maxtext.reader import Reader, read_file
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.codec import SERIAL, ArrayEncoder
from pipecheck.records.imported import ImportedRun

__all__ = ["GLOG_HEADER", "HALVES_MIN_BYTES", "PROFILER_STEP_MARK", "STEP_MARK", "ParsedLog",
           "import_lines", "import_log", "imported", "parse_file", "parse_lines"]


PROGRESS_EVERY_LINES = 20000
"""Lines read between two progress updates: often enough for a smooth bar, rare enough to
cost nothing next to parsing them."""


def parse_lines(lines: Iterable[str] | TextIO,
                progress: Callable[[int], None] | None = None) -> ParsedLog:
    """Read the lines that matter; ignore the rest.

    One pass; a file is read in blocks (``blocks.READ_BLOCK_CHARS``), any other iterable in
    batches of ``PROGRESS_EVERY_LINES`` lines; the step lines of each are read into numbers
    at once and no line's text is kept. ``progress(chars)`` hears of the characters read, a
    block or a batch at a time."""
    r = Reader()
    n = 1
    if hasattr(lines, "read"):
        n = read_file(r, lines, n, progress)  # type: ignore[arg-type]
    else:
        batch: list[str] = []
        chars = 0
        for raw in physical_lines(lines):
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
    return parsed(r, n)


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
               encoder: ArrayEncoder = SERIAL) -> ImportedRun:
    """Read and parse a MaxText training log file (plain or gzip), streaming it line by
    line. ``encoder``: the one the record will be written with, given its step columns
    while the steps are analysed and its steady step times while it is reported (a
    ``pipecheck.encoding.ParallelEncoder`` compresses them meanwhile, on another thread)."""
    p = parse_file(path, progress)
    encoder.compress_ahead(p.steps.per_step_arrays())
    run = imported(p, str(path))
    encoder.compress_ahead([np.asarray(run.step_time.samples_s)])
    return run
