"""D and the page cache on hand-built settings: measured warm on data larger than the cache,
and a level change named as the pass over the data turning warm only where it falls where
that pass ended."""

from __future__ import annotations

from pipecheck.analysis.loader import warm_cache as wc
from pipecheck.records.dataloader import PageCache, Reads

READS = Reads("SourceMapDataset(source=ArrayRecordDataSource)", "main", 0.005, 8.0, 0.9)
COLD = PageCache(files=1, data_bytes=2_000_000, resident_before=0.0, resident_after=1.0)
WARM = PageCache(files=1, data_bytes=8 * 10**9, resident_before=0.97, resident_after=0.98)


def series(cold_batches: int, total: int, cold_s: float = 0.040, warm_s: float = 0.004
           ) -> list[float]:
    """Batch times: ``cold_batches`` read from storage, the rest from the page cache (a
    deterministic wobble of 2%)."""
    wobble = [1 + 0.02 * ((i * 7) % 5 - 2) / 2 for i in range(total)]
    return [(cold_s if i < cold_batches else warm_s) * w for i, w in enumerate(wobble)]


def test_warm_d_on_data_larger_than_the_cache_is_a_warning():
    text = wc.too_big_for_cache(WARM, available_bytes=2 * 10**9)
    assert text == (
        "D was measured warm (97% of the data files' 8.0 GB in the page cache) but the files "
        "are larger than the memory the cache can hold (2.0 GB available): a run that reads "
        "them all reads most of each pass from storage, slower than this D; measure with "
        "--cold for the D it will see")
    assert wc.too_big_for_cache(WARM, available_bytes=9 * 10**9) is None  # it fits
    assert wc.too_big_for_cache(COLD, available_bytes=1) is None  # measured cold
    unknown = PageCache(files=1, data_bytes=10**10, resident_before=None, resident_after=None)
    assert wc.too_big_for_cache(unknown, available_bytes=1) is None


def test_a_drop_where_the_first_pass_ends_is_named_the_cache_turning_warm():
    records = 160  # 20 batches of 8 reads: the timed batch 19 starts the second pass
    samples = series(cold_batches=19, total=50)
    change = wc.warm_pass_change(samples, READS, COLD, records)
    assert change is not None and change.index == 19
    assert change.after_median < change.before_median
    assert wc.warm_pass_text(change, records, READS) == (
        "D changes level at timed batch 20, from 40.0 ms to 4.00 ms a batch, where the first "
        "pass over the data ended (160 records, 8 reads a batch): from there the reads came "
        "from the page cache, so D mixes a cold pass and warm ones; time fewer than 20 "
        "--batches with --cold for the cold D, or many more for the warm one")
    assert wc.cache_warnings(samples, READS, COLD, records, available_bytes=10**9) == [
        wc.warm_pass_text(change, records, READS)]


def test_reads_made_ahead_of_the_batches_move_the_pass_end_earlier():
    samples = series(cold_batches=15, total=50)  # 32 reads ahead: 4 batches early
    assert wc.warm_pass_change(samples, READS, COLD, 160, ahead_reads=32) is not None
    assert wc.warm_pass_change(samples, READS, COLD, 160 + 8 * 20) is None  # far from it


def test_other_level_changes_are_not_named_so():
    records = 160
    assert wc.warm_pass_change(series(35, 50), READS, COLD, records) is None  # elsewhere
    slower = [0.004] * 19 + [0.040] * 31  # a rise is not the cache turning warm
    assert wc.warm_pass_change(slower, READS, COLD, records) is None
    assert wc.warm_pass_change(series(19, 50), READS, WARM, records) is None  # started warm
    assert wc.warm_pass_change(series(19, 50), None, COLD, records) is None
    assert wc.warm_pass_change([0.004] * 50, READS, COLD, records) is None  # no change
    assert wc.warm_pass_change(series(19, 22), READS, COLD, records) is None  # too few after
