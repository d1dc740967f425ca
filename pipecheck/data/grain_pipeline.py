"""The Grain pipeline for one setting: a workload's dataset read with T threads and W
worker processes (``build_iter_dataset``), the pipeline shapes pipecheck builds
(``BatchedExamples``, ``MainProcessMap``), Grain's stage timing, and the names the workers
give their shared memory (so the run's clean-up can reclaim exactly its own)."""

from __future__ import annotations

import dataclasses
import secrets
import sys
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple, Sequence, Union

import numpy as np

from pipecheck.data.grain_dataloader import is_data_loader, with_settings
from pipecheck.errors import ConfigError
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


class Asked(NamedTuple):
    """Values the user asked pipecheck to set for one Grain knob, and where they asked."""

    option: str
    """As the user wrote it: ``--threads``, ``the config's num_workers``."""
    knob: str
    """``workers``, ``per_worker_buffer``, ``threads`` or ``prefetch`` (the GrainSettings
    field), or ``max_workers`` (the ceiling of a worker search)."""
    values: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class OwnSettings:
    """The Grain knobs a pipeline fixes itself (an IterDataset the user built): pipecheck
    reports them as they are, never overrides them and never adds an ``mp_prefetch`` to a
    pipeline that has its own. Found by ``own_settings``."""

    read: tuple[int, int] | None = None
    """``(num_threads, prefetch_buffer_size)`` of the ``grain.ReadOptions`` the pipeline
    passes to its own ``to_iter_dataset``."""
    workers: tuple[int, int] | None = None
    """``(num_workers, per_worker_buffer_size)`` of the pipeline's own ``mp_prefetch``:
    its worker processes, counted in Grain's graph."""

    def applied(self, settings: GrainSettings) -> GrainSettings:
        """``settings`` as they run on the pipeline: what it fixes replaced by its own."""
        if self.read is not None:
            threads, prefetch = self.read
            # no prefetch buffer: Grain reads on the calling thread, with no read threads
            settings = dataclasses.replace(settings, threads=threads if prefetch else 0,
                                           prefetch=prefetch)
        if self.workers is not None:
            settings = dataclasses.replace(settings, workers=self.workers[0],
                                           per_worker_buffer=self.workers[1])
        return settings

    def note(self) -> str | None:
        """What a report says of a pipeline that fixes knobs itself (None: it fixes none)."""
        if self.workers is None:
            return None if self.read is None else self._read_note()
        read = f" and its read options ({self._read_options()} in its to_iter_dataset)" \
            if self.read is not None else ""
        return (f"the pipeline runs its own worker processes ({self._mp_prefetch()}){read}: "
                "reported as they are; pipecheck adds no mp_prefetch of its own and cannot "
                "tune what the pipeline fixes, so it measures the pipeline as it is (return "
                "the dataset without mp_prefetch to let pipecheck search the workers)")

    def refuse(self, asked: Sequence[Asked]) -> None:
        """A ConfigError for the first value asked that the pipeline would not run with
        (measuring something else than asked is worse than stopping)."""
        for a in asked:
            allowed = self._runs_with(a.knob)
            if allowed is None or set(a.values) <= allowed:
                continue
            values = ",".join(str(v) for v in a.values)
            if a.knob in ("threads", "prefetch"):
                raise ConfigError(
                    f"{a.option} {values} cannot change this pipeline's {_KNOB_WORDS[a.knob]}: "
                    f"it sets {self._read_options()} in its own to_iter_dataset; drop "
                    f"{a.option}, or change the ReadOptions in the pipeline (pipecheck sets "
                    "read options only on a MapDataset it reads itself)")
            if a.knob == "max_workers":
                raise ConfigError(
                    f"{a.option} {values} has nothing to search: the pipeline calls "
                    f"{self._mp_prefetch()} itself, so its workers are measured as they are; "
                    f"drop {a.option}, or remove mp_prefetch from the pipeline to let "
                    "pipecheck search the workers")
            raise ConfigError(
                f"{a.option} {values} cannot change this pipeline's {_KNOB_WORDS[a.knob]}: "
                f"it calls {self._mp_prefetch()} itself; drop {a.option}, or remove "
                "mp_prefetch from the pipeline to let pipecheck set the workers")

    def _runs_with(self, knob: str) -> set[int] | None:
        """The values of ``knob`` the pipeline runs with (None: pipecheck sets it)."""
        if knob in ("threads", "prefetch") and self.read is not None:
            as_run = self.applied(GrainSettings())
            own = self.read[0] if knob == "threads" else self.read[1]
            return {own, getattr(as_run, knob)}
        if self.workers is None:
            return None
        return {"workers": {self.workers[0]}, "per_worker_buffer": {self.workers[1]},
                "max_workers": set()}.get(knob)

    def _read_options(self) -> str:
        assert self.read is not None
        return (f"grain.ReadOptions(num_threads={self.read[0]}, "
                f"prefetch_buffer_size={self.read[1]})")

    def _mp_prefetch(self) -> str:
        assert self.workers is not None
        return (f"mp_prefetch(grain.MultiprocessingOptions(num_workers={self.workers[0]}, "
                f"per_worker_buffer_size={self.workers[1]}))")

    def _read_note(self) -> str:
        unused = (" (a prefetch buffer of 0: Grain reads on the calling thread, so threads=0)"
                  if self.read is not None and self.read[1] == 0 else "")
        return (f"the pipeline sets its own read options ({self._read_options()} in its "
                f"to_iter_dataset){unused}: reported as they are; pipecheck sets and tunes only "
                "the worker processes and their buffers (mp_prefetch)")


_KNOB_WORDS = {"workers": "worker processes", "per_worker_buffer": "per-worker buffer",
               "threads": "read threads", "prefetch": "read prefetch buffer"}


def grain_graph(dataset: grain.IterDataset) -> Iterator[object]:
    """Every dataset in a Grain dataset's graph, each once, from the output down. Grain's
    private graph: a dataset's parents are in ``_parents``; the per-worker shards an
    ``mp_prefetch`` interleaves are in its InterleaveIterDataset's ``_datasets``."""
    seen: set[int] = set()
    todo = [dataset]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        shards = getattr(node, "_datasets", ())
        todo.extend(reversed([*getattr(node, "_parents", ()),
                              *(shards if isinstance(shards, (list, tuple)) else ())]))


def own_settings(dataset: InputPipeline) -> OwnSettings:
    """The Grain knobs an IterDataset built by the user fixes itself: the ``ReadOptions``
    of its own ``to_iter_dataset`` and the worker processes of its own ``mp_prefetch``.
    A MapDataset, :class:`BatchedExamples` or ``grain.DataLoader`` fixes none (pipecheck
    sets them all)."""
    if isinstance(dataset, MainProcessMap):
        return own_settings(dataset.dataset)
    grain = sys.modules.get("grain")
    iter_type = getattr(grain, "IterDataset", None)
    if not isinstance(iter_type, type) or not isinstance(dataset, iter_type):
        return OwnSettings()
    worker_type = _process_prefetch_type()
    read = None
    workers: list[int] = []  # each worker's buffer: one ProcessPrefetchIterDataset a worker
    for node in grain_graph(dataset):
        options = getattr(node, "_read_options", None)
        if options is not None and read is None:
            read = int(options.num_threads), int(options.prefetch_buffer_size)
        if worker_type is not None and isinstance(node, worker_type):
            workers.append(int(getattr(node, "_buffer_size", 1)))
    return OwnSettings(read, (len(workers), workers[0]) if workers else None)


AT_MOST_ONE_OUT_PER_IN = frozenset({
    "MapIterDataset", "RandomMapIterDataset", "MapWithIndexIterDataset", "FilterIterDataset",
    "FirstFitPackIterDataset", "BestFitPackIterDataset", "LimitIterDataset",
    "RepeatIterDataset", "WindowShuffleIterDataset", "PrefetchIterDataset",
    "ThreadPrefetchIterDataset", "ProcessPrefetchIterDataset", "InterleaveIterDataset",
    "WithOptionsIterDataset", "_MpContextIterDataset", "_LazyWorkerSliceIterDataset"})
"""Grain's IterDatasets that give at most one element per element they read (maps, filters,
first-/best-fit packing, which never splits a sequence, prefetches, the worker shards of
``mp_prefetch``): below a batch of B, B of their outputs need at least B read elements.
Any other transform (flat_map, concat-then-split packing, rebatch) may split an element
into many, and the bound falls back to one element per batch."""


def read_elements_per_batch(dataset: InputPipeline) -> int:
    """Elements of the read prefetch buffer (``ReadOptions.prefetch_buffer_size`` counts the
    elements ``to_iter_dataset`` reads) that one batch of the pipeline consumes at least:
    the product of the batch sizes between the read and the output, each packed row taking at
    least one element. 1 when the pipeline reads whole batches, or when a transform that may
    split elements lies between (then the buffer is counted as batches, the most it could be
    without a bound)."""
    if isinstance(dataset, MainProcessMap):
        return read_elements_per_batch(dataset.dataset)
    if isinstance(dataset, BatchedExamples):  # examples read, then batched by pipecheck
        return dataset.batch_size
    grain = sys.modules.get("grain")
    iter_type = getattr(grain, "IterDataset", None)
    if not isinstance(iter_type, type) or not isinstance(dataset, iter_type):
        return 1  # a MapDataset of batches (read as they are) or a grain.DataLoader
    return _reads_per_output(dataset, frozenset()) or 1


def _reads_per_output(node: object, path: frozenset[int]) -> int | None:
    """Read elements one output of ``node`` needs at least (0: no bound known; None: no read
    below ``node``). A node with several inputs (``mp_prefetch``'s worker shards) needs the
    least of theirs."""
    if getattr(node, "_read_options", None) is not None:
        return 1
    shards = getattr(node, "_datasets", ())
    below = [n for n in (*getattr(node, "_parents", ()),
                         *(shards if isinstance(shards, (list, tuple)) else ()))
             if id(n) not in path]
    found = [r for r in (_reads_per_output(n, path | {id(node)}) for n in below)
             if r is not None]
    if not found:
        return None
    name = type(node).__name__
    if 0 in found or (name != "BatchIterDataset" and name not in AT_MOST_ONE_OUT_PER_IN):
        return 0
    factor = int(getattr(node, "_batch_size", 1)) if name == "BatchIterDataset" else 1
    return factor * min(found)


def _process_prefetch_type() -> type | None:
    """Grain's dataset for one ``mp_prefetch`` worker process (None if Grain moved it)."""
    try:  # lazy: Grain's private module, imported only once a Grain dataset exists
        from grain._src.python.dataset.transformations import process_prefetch
    except ImportError:  # pragma: no cover - Grain layout changed
        return None
    return getattr(process_prefetch, "ProcessPrefetchIterDataset", None)


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
                       shm_tag: str | None = None,
                       own: OwnSettings | None = None) -> grain.IterDataset:
    """A Grain IterDataset over ``dataset`` read with ``settings``: its read threads and
    prefetch buffer, its worker processes, each holding up to its per-worker buffer of
    batches ready (0 workers: everything in the calling process, as a loop without workers).

    ``dataset`` is a MapDataset or IterDataset of whole batches, :class:`BatchedExamples`
    or :class:`MainProcessMap`. ``stage_timing`` turns on Grain's STAGE_TIMING execution
    tracking (read it with ``grain_stage_summary``). With ``shm_tag`` (see
    ``new_shm_tag``) the workers name their shared-memory segments with it, so a failed run
    can reclaim exactly its own (``reclaim_shared_memory``). ``own``: what the pipeline
    fixes itself, where the caller read it already (else read here, ``own_settings``).
    """
    # lazy: Grain imported where used, so `import pipecheck` stays light
    import grain

    if isinstance(dataset, MainProcessMap):
        inner = build_iter_dataset(dataset.dataset, settings, stage_timing=stage_timing,
                                   worker_init_fn=worker_init_fn, shm_tag=shm_tag, own=own)
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
    own_workers = (own if own is not None else own_settings(dataset)).workers
    if settings.workers > 0 and own_workers is None:  # never nested
        if shm_tag is not None:
            worker_init_fn = TagSharedMemory(shm_tag, worker_init_fn)
        ds = ds.mp_prefetch(multiprocessing_options, worker_init_fn=worker_init_fn)
    return ds


def flush_shared_memory_unlinks(timeout_s: float = 5.0) -> None:
    """Wait until Grain's background thread has unlinked the shared memory of batches that
    were dropped (it deletes asynchronously; exiting first leaves them to the resource
    tracker, which warns about "leaked shared_memory objects")."""
    try:  # lazy: Grain imported where used, so `import pipecheck` stays light
        from grain._src.python.ipc.shared_memory_array import SharedMemoryArray
    except ImportError:  # pragma: no cover - Grain layout changed
        return
    pool = getattr(SharedMemoryArray, "_del_thread_pool", None)
    if pool is None:
        return
    try:
        pool.apply_async(int).get(timeout_s)  # FIFO: runs after every queued unlink
    except Exception:  # noqa: BLE001 - best effort
        pass


def first_batch(dataset: InputPipeline) -> dict[str, np.ndarray]:
    """The pipeline's first batch, read in the calling process with no workers of
    pipecheck's (a pipeline's own ``mp_prefetch`` workers start for it and are stopped
    before this returns), its arrays copied out of Grain's shared memory so that none stays
    mapped, or is reported leaked, at exit."""
    it = iter(build_iter_dataset(dataset, IN_PROCESS))
    try:
        return {k: np.array(v) for k, v in dict(next(it)).items()}
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
        del it
        flush_shared_memory_unlinks()


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
