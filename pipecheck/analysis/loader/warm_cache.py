"""D and the page cache: a D measured warm that a long run will not see, and a change of D's
level where the pass over the data turned warm. Pure functions.

A setting was measured *warm* when at least ``WARM_SHARE`` of its data files' bytes were in
the page cache before it started (``records.dataloader.PageCache``). Its D then holds reads
served from memory; a run that reads more data than the page cache can hold (the data
files' size against the memory available, free plus reclaimable cache) reads most of each
pass from storage instead, so that D is too good (``too_big_for_cache``).

A setting that starts cold reads every record from storage until one pass over the data
ends (``records`` reads; with a shuffle each record once); from there the reads hit the
page cache and batches get faster. When a level change of the setting's batch times
(``analysis.level_shift``) falls where that pass ended, it is named as such
(``warm_pass_change``): D then mixes a cold pass and warm ones.
"""

from __future__ import annotations

from typing import Sequence

from pipecheck.analysis import level_shift
from pipecheck.records.dataloader import PageCache, Reads
from pipecheck.units import ms

WARM_SHARE = 0.5
"""Half of the data files' bytes in the page cache before a setting: its reads come from
memory more often than from storage, so its D is a warm one."""

PASS_TOLERANCE = 0.1
"""A level change within 10% of the batches of one pass (and within ``PASS_SLACK_BATCHES``)
of where the pass ended falls there: reads run ahead of the batches (the read prefetch,
workers' buffers) and records share pages, so the cache turns warm a little early."""

PASS_SLACK_BATCHES = 3
"""At least this many batches either side of the pass's end count as at it."""


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def too_big_for_cache(cache: PageCache, available_bytes: int) -> str | None:
    """The warning for a D measured warm on data larger than the page cache can hold, or
    None."""
    before = cache.resident_before
    if before is None or before < WARM_SHARE or cache.data_bytes <= available_bytes:
        return None
    return (f"D was measured warm ({100 * before:.0f}% of the data files' "
            f"{_size(cache.data_bytes)} in the page cache) but the files are larger than the "
            f"memory the cache can hold ({_size(available_bytes)} available): a run that reads "
            "them all reads most of each pass from storage, slower than this D; measure with "
            "--cold for the D it will see")


def pass_end(records: int, reads_per_batch: float) -> float:
    """Index of the timed batch (the first batch not counted) that starts the second pass
    over the data: ``records`` reads in, ``reads_per_batch`` a batch."""
    return records / reads_per_batch - 1 if reads_per_batch > 0 else float("inf")


def warm_pass_change(samples: Sequence[float], reads: Reads | None, cache: PageCache,
                     records: int, ahead_reads: int = 0) -> level_shift.Change | None:
    """The drop of the batch times where the setting's first pass over the data ended (it
    started cold: less than ``WARM_SHARE`` resident), or None. ``ahead_reads``: reads the
    pipeline makes ahead of the batch being consumed (read prefetch, workers' buffers)."""
    if reads is None or records <= 0 or cache.resident_before is None or \
            cache.resident_before >= WARM_SHARE:
        return None
    end = pass_end(records - ahead_reads, reads.reads_per_batch)
    if not level_shift.MIN_SEGMENT_STEPS <= end <= len(samples) - level_shift.MIN_SEGMENT_STEPS:
        return None
    slack = max(PASS_SLACK_BATCHES, PASS_TOLERANCE * records / reads.reads_per_batch)
    for change in level_shift.changes(samples, candidates=[round(end)]):
        if change.after_median < change.before_median and abs(change.index - end) <= slack:
            return change
    return None


def warm_pass_text(change: level_shift.Change, records: int, reads: Reads) -> str:
    """The warning naming a level change as the pass over the data turning warm."""
    batches = records / reads.reads_per_batch
    return (f"D changes level at timed batch {change.index + 1}, from "
            f"{ms(change.before_median)} to {ms(change.after_median)} a batch, where the first "
            f"pass over the data ended ({records} records, {reads.reads_per_batch:.0f} reads a "
            "batch): from there the reads came from the page cache, so D mixes a cold pass "
            f"and warm ones; time fewer than {batches:.0f} --batches with --cold for the cold "
            "D, or many more for the warm one")


def cache_warnings(samples: Sequence[float], reads: Reads | None, cache: PageCache,
                   records: int, available_bytes: int, ahead_reads: int = 0) -> list[str]:
    """A setting's page-cache warnings: measured warm on data the cache cannot hold, and a
    level change where the pass over the data turned warm."""
    out = []
    big = too_big_for_cache(cache, available_bytes)
    if big is not None:
        out.append(big)
    change = warm_pass_change(samples, reads, cache, records, ahead_reads)
    if change is not None and reads is not None:
        out.append(warm_pass_text(change, records, reads))
    return out
