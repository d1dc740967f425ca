"""Turning a workload's Grain dataset into a batch iterator with W workers and T threads."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

DEFAULT_PER_WORKER_BUFFER = 2
"""Batches each worker may hold ready (MultiprocessingOptions.per_worker_buffer_size)."""

STAGE_REPORT_PERIOD_S = 0.25
"""How often Grain folds stage timings into its summary and workers send theirs to the main
process when pipecheck asks for stage timing (Grain's own period is 5 s, too slow for runs of
a few seconds)."""


def ensure_absl_flags_parsed() -> None:
    """Grain reads absl flags; outside ``absl.app.run`` they must be marked parsed, or any
    run with workers dies with UnparsedFlagAccessError."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


@dataclasses.dataclass(frozen=True)
class BatchedExamples:
    """A per-example ``MapDataset`` and the batch size to group it into.

    ``build_iter_dataset`` turns it into the canonical Grain pipeline:
    ``examples.to_iter_dataset(ReadOptions(num_threads)).batch(batch_size)`` then
    ``mp_prefetch``. Iterating it directly yields whole batches (no threads, no workers).
    """

    examples: Any
    batch_size: int
    drop_remainder: bool = True

    def __iter__(self) -> Iterator[Any]:
        return iter(build_iter_dataset(self, workers=0, threads=0))


def set_stage_report_period(seconds: float = STAGE_REPORT_PERIOD_S) -> None:
    """Shorten Grain's stage-timing report period in this process (a module constant of
    grain 0.2.x; silently does nothing if a Grain version no longer has it)."""
    try:
        from grain._src.python.dataset import stats
    except ImportError:  # pragma: no cover - Grain layout changed
        return
    if hasattr(stats, "_REPORTING_PERIOD_SEC"):
        stats._REPORTING_PERIOD_SEC = seconds


def _stage_timing_worker_init(worker_index: int, worker_count: int) -> None:
    """``mp_prefetch`` worker_init_fn: workers report stage timings every few 100 ms."""
    del worker_index, worker_count
    set_stage_report_period()


def build_iter_dataset(dataset: Any, workers: int, threads: int, *,
                       stage_timing: bool = False,
                       worker_init_fn: Callable[[int, int], None] | None = None) -> Any:
    """A Grain IterDataset over ``dataset`` read with ``threads`` threads and ``workers``
    worker processes (0: everything in the calling process, as a loop without workers).

    ``dataset`` is a MapDataset or IterDataset of whole batches, or
    :class:`BatchedExamples`. ``stage_timing`` turns on Grain's STAGE_TIMING execution
    tracking (read it with ``grain_stage_summary``).
    """
    import grain

    ensure_absl_flags_parsed()
    read = grain.ReadOptions(num_threads=threads, prefetch_buffer_size=max(1, 2 * threads))
    if isinstance(dataset, BatchedExamples):
        ds = dataset.examples.to_iter_dataset(read).batch(
            dataset.batch_size, drop_remainder=dataset.drop_remainder)
    elif isinstance(dataset, grain.MapDataset):
        ds = dataset.to_iter_dataset(read)
    else:
        ds = dataset
    if stage_timing:
        set_stage_report_period()
        options = grain.experimental.DatasetOptions(
            execution_tracking_mode=grain.experimental.ExecutionTrackingMode.STAGE_TIMING)
        ds = grain.experimental.WithOptionsIterDataset(ds, options)
        if worker_init_fn is None:
            worker_init_fn = _stage_timing_worker_init
    if workers > 0:
        ds = ds.mp_prefetch(
            grain.MultiprocessingOptions(
                num_workers=workers, per_worker_buffer_size=DEFAULT_PER_WORKER_BUFFER
            ),
            worker_init_fn=worker_init_fn,
        )
    return ds


def grain_stage_summary(iterator: Any) -> Any:
    """Grain's execution summary (a proto) of an iterator built with ``stage_timing``."""
    from grain._src.python.dataset import dataset as grain_dataset

    return grain_dataset.get_execution_summary(iterator)
