"""The Grain pipeline for one setting: a workload's dataset read with T threads and W
worker processes (``build_iter_dataset``), the pipeline shapes pipecheck builds
(``BatchedExamples``, ``MainProcessMap``), Grain's stage timing, and the names the workers
give their shared memory (so the run's clean-up can reclaim exactly its own)."""

from __future__ import annotations

import dataclasses
import secrets
import sys
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Callable, Iterator, Union

from pipecheck.data.grain_dataloader import is_data_loader, with_settings
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.step_types import Batch

if TYPE_CHECKING:  # Grain is imported where used: `import pipecheck` stays light
    import grain
    from grain.proto.execution_summary_pb2 import ExecutionSummary

STAGE_REPORT_PERIOD_S = 0.25
"""How often Grain folds stage timings into its summary and workers send theirs to the main
process when pipecheck asks for stage timing (Grain's own period is 5 s, too slow for runs of
a few seconds)."""


def ensure_absl_flags_parsed() -> None:
    """Grain reads absl flags; outside ``absl.app.run`` they must be marked parsed, or any
    run with workers dies with UnparsedFlagAccessError."""
    # lazy: Grain, absl (Grain's flags) imported where used, so `import pipecheck` stays light
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

    examples: grain.MapDataset
    batch_size: int
    drop_remainder: bool = True

    def __iter__(self) -> Iterator[Batch]:
        return iter(build_iter_dataset(self, IN_PROCESS))


@dataclasses.dataclass(frozen=True)
class MainProcessMap:
    """A pipeline whose last transform runs in the training process, after the workers'
    output (collation, format conversion, ...): ``build_iter_dataset`` builds ``dataset``
    as usual and maps ``fn`` over its batches after ``mp_prefetch``."""

    dataset: InputPipeline
    fn: Callable[[Batch], Batch]

    def __iter__(self) -> Iterator[Batch]:
        return iter(build_iter_dataset(self, IN_PROCESS))


InputPipeline = Union["grain.MapDataset", "grain.IterDataset", "grain.DataLoader",
                      BatchedExamples, MainProcessMap]
"""What a workload's ``dataset`` builds: a Grain dataset or ``grain.DataLoader`` (which
pipecheck runs with the setting it measures), examples pipecheck batches, or a pipeline with
a last transform in the training process. Grain ships no type information, so mypy reads
the Grain types as ``Any``; the names say what is meant."""

IN_PROCESS = GrainSettings(workers=0, threads=0)
"""Everything in the calling process, read by no thread: a pipeline iterated directly."""


def own_read_options(dataset: InputPipeline) -> tuple[int, int] | None:
    """``(num_threads, prefetch_buffer_size)`` of the ``grain.ReadOptions`` an IterDataset
    built by the user passes to its own ``to_iter_dataset``, or None where pipecheck sets
    them (a MapDataset, :class:`BatchedExamples`, a ``grain.DataLoader``)."""
    if isinstance(dataset, MainProcessMap):
        return own_read_options(dataset.dataset)
    grain = sys.modules.get("grain")
    iter_type = getattr(grain, "IterDataset", None)
    if not isinstance(iter_type, type) or not isinstance(dataset, iter_type):
        return None
    todo = [dataset]
    while todo:  # Grain's private graph: each dataset's parents in ``_parents``
        node = todo.pop()
        read = getattr(node, "_read_options", None)
        if read is not None:
            return int(read.num_threads), int(read.prefetch_buffer_size)
        todo.extend(getattr(node, "_parents", ()))
    return None


def own_read_note(own: tuple[int, int]) -> str:
    """What a report says of a pipeline that sets its own read options."""
    threads, prefetch = own
    unused = (" (a prefetch buffer of 0: Grain reads on the calling thread, so threads=0)"
              if prefetch == 0 else "")
    return (f"the pipeline sets its own read options (grain.ReadOptions(num_threads={threads}, "
            f"prefetch_buffer_size={prefetch}) in its to_iter_dataset){unused}: reported as "
            "they are; pipecheck sets and tunes only the worker processes and their buffers "
            "(mp_prefetch)")


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


def build_iter_dataset(dataset: InputPipeline, settings: GrainSettings, *,
                       stage_timing: bool = False,
                       worker_init_fn: Callable[[int, int], None] | None = None,
                       shm_tag: str | None = None) -> grain.IterDataset:
    """A Grain IterDataset over ``dataset`` read with ``settings``: its read threads and
    prefetch buffer, its worker processes, each holding up to its per-worker buffer of
    batches ready (0 workers: everything in the calling process, as a loop without workers).

    ``dataset`` is a MapDataset or IterDataset of whole batches, :class:`BatchedExamples`
    or :class:`MainProcessMap`. ``stage_timing`` turns on Grain's STAGE_TIMING execution
    tracking (read it with ``grain_stage_summary``). With ``shm_tag`` (see
    ``new_shm_tag``) the workers name their shared-memory segments with it, so a failed run
    can reclaim exactly its own (``reclaim_shared_memory``).
    """
    # lazy: Grain imported where used, so `import pipecheck` stays light
    import grain

    if isinstance(dataset, MainProcessMap):
        inner = build_iter_dataset(dataset.dataset, settings, stage_timing=stage_timing,
                                   worker_init_fn=worker_init_fn, shm_tag=shm_tag)
        return inner.map(dataset.fn)
    ensure_absl_flags_parsed()
    if is_data_loader(dataset):  # its own workers; Grain's stage timing cannot see inside
        return with_settings(dataset, settings)
    multiprocessing_options, read = settings.options()
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
    if settings.workers > 0:
        if shm_tag is not None:
            worker_init_fn = TagSharedMemory(shm_tag, worker_init_fn)
        ds = ds.mp_prefetch(multiprocessing_options, worker_init_fn=worker_init_fn)
    return ds


def grain_stage_summary(iterator: Iterator[Batch]) -> ExecutionSummary:
    """Grain's execution summary (a proto) of an iterator built with ``stage_timing``."""
    from grain._src.python.dataset import dataset as grain_dataset

    return grain_dataset.get_execution_summary(iterator)


def new_shm_tag() -> str:
    """A tag for one pipeline's shared memory: ``psm_pc<8 hex>_...`` names its segments."""
    return f"pc{secrets.token_hex(4)}_"


@dataclasses.dataclass(frozen=True)
class TagSharedMemory:
    """``mp_prefetch`` worker_init_fn: this worker names the shared-memory segments it creates
    ``psm_<tag><hex>`` (then runs ``inner``), so the main process can tell its own workers'
    segments from every other process's on the machine."""

    tag: str
    inner: Callable[[int, int], None] | None = None

    def __call__(self, worker_index: int, worker_count: int) -> None:
        tag_shared_memory_names(self.tag)
        if self.inner is not None:
            self.inner(worker_index, worker_count)


def tag_shared_memory_names(tag: str) -> None:
    """Make ``multiprocessing.shared_memory`` name new segments ``/psm_<tag><hex>`` in this
    process (through its private name generator; a Python
    without it keeps its own names and nothing is reclaimed)."""
    if not hasattr(shared_memory, "_make_filename"):  # pragma: no cover - Python changed
        return

    def tagged_filename() -> str:
        return f"/psm_{tag}{secrets.token_hex(6)}"

    shared_memory._make_filename = tagged_filename  # type: ignore[attr-defined]
