"""Turning a workload's Grain dataset into a batch iterator with W workers and T threads."""

from __future__ import annotations

from typing import Any

DEFAULT_PER_WORKER_BUFFER = 2
"""Batches each worker may hold ready (MultiprocessingOptions.per_worker_buffer_size)."""


def ensure_absl_flags_parsed() -> None:
    """Grain reads absl flags; outside ``absl.app.run`` they must be marked parsed, or any
    run with workers dies with UnparsedFlagAccessError."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


def build_iter_dataset(dataset: Any, workers: int, threads: int) -> Any:
    """A Grain IterDataset over ``dataset`` read with ``threads`` threads and ``workers``
    worker processes (0: everything in the calling process, as a loop without workers)."""
    import grain

    ensure_absl_flags_parsed()
    ds = dataset
    if isinstance(ds, grain.MapDataset):
        ds = ds.to_iter_dataset(
            grain.ReadOptions(num_threads=threads, prefetch_buffer_size=max(1, 2 * threads))
        )
    if workers > 0:
        ds = ds.mp_prefetch(
            grain.MultiprocessingOptions(
                num_workers=workers, per_worker_buffer_size=DEFAULT_PER_WORKER_BUFFER
            )
        )
    return ds
