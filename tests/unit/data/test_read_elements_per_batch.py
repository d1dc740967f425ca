"""How many of the elements a pipeline's read prefetch buffers make one batch, at least, read
from Grain's dataset graph (real Grain datasets as users write them; nothing is iterated)."""

from __future__ import annotations

import grain
import numpy as np
from grain._src.python.dataset.transformations.rebatch import RebatchIterDataset

from pipecheck.data.grain_pipeline import BatchedExamples, MainProcessMap, read_elements_per_batch

SEQ = 32


def documents(prefetch: int = 64) -> grain.IterDataset:
    """Variable-length documents read ahead with the pipeline's own ReadOptions."""
    def tokens(i: int) -> dict[str, np.ndarray]:
        ids = np.arange(3 + i % 40, dtype=np.int32)[:SEQ]
        return {"inputs": ids, "targets": ids}

    return (grain.MapDataset.range(400).seed(0).shuffle().repeat().map(tokens)
            .to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=prefetch)))


def packed(batch: int = 16) -> grain.IterDataset:
    """MaxText's shape: documents, first-fit packing into rows, a batch of rows."""
    rows = grain.experimental.FirstFitPackIterDataset(
        documents(), length_struct={"inputs": SEQ, "targets": SEQ}, num_packing_bins=4)
    return rows.batch(batch, drop_remainder=True)


def test_packed_rows_take_at_least_one_document_each():
    assert read_elements_per_batch(packed(16)) == 16
    assert read_elements_per_batch(packed(16).map(lambda b: b)) == 16  # a map after batching


def test_the_bound_holds_below_the_workers_and_a_main_process_map():
    own_workers = packed(8).mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    assert read_elements_per_batch(own_workers) == 8
    assert read_elements_per_batch(MainProcessMap(packed(8), lambda b: b)) == 8


def test_batches_of_batches_multiply():
    assert read_elements_per_batch(documents().batch(4).batch(2)) == 8


def test_a_pipeline_of_whole_batches_reads_batches():
    batches = grain.MapDataset.range(64).map(lambda i: {"x": np.zeros((16, 4))})
    assert read_elements_per_batch(batches) == 1  # pipecheck reads it: elements are batches
    assert read_elements_per_batch(batches.to_iter_dataset()) == 1
    examples = grain.MapDataset.range(64).map(lambda i: {"x": np.zeros(4)})
    assert read_elements_per_batch(BatchedExamples(examples, 16)) == 16


def test_a_transform_that_may_split_elements_gives_no_bound():
    # rebatching (as concat-then-split packing or a flat map) can make many outputs of one
    # element: the buffer is counted as batches, as many as it could be without a bound
    assert read_elements_per_batch(RebatchIterDataset(documents().batch(4), 2)) == 1
