"""Turning a workload's Grain dataset into a batch iterator with W workers and T threads."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import multiprocessing
import os
import secrets
import signal
import threading
import time
import weakref
from multiprocessing import shared_memory
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Iterator

from pipecheck.errors import PipelineStallError
from pipecheck.measure.grain_dataloader import is_data_loader, with_settings
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, default_prefetch
from pipecheck.user_code import pipeline_error

if TYPE_CHECKING:  # Grain is imported where used: `import pipecheck` stays light
    from grain.proto.execution_summary_pb2 import ExecutionSummary

WORKER_EXIT_WAIT_S = 3.0
"""How long a terminated worker gets to exit before it is killed."""

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

    examples: Any
    batch_size: int
    drop_remainder: bool = True

    def __iter__(self) -> Iterator[Any]:
        return iter(build_iter_dataset(self, workers=0, threads=0))


@dataclasses.dataclass(frozen=True)
class MainProcessMap:
    """A pipeline whose last transform runs in the training process, after the workers'
    output (collation, format conversion, ...): ``build_iter_dataset`` builds ``dataset``
    as usual and maps ``fn`` over its batches after ``mp_prefetch``."""

    dataset: Any
    fn: Callable[[Any], Any]

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
                       worker_init_fn: Callable[[int, int], None] | None = None,
                       per_worker_buffer: int = DEFAULT_PER_WORKER_BUFFER,
                       prefetch: int = 0, shm_tag: str | None = None) -> Any:
    """A Grain IterDataset over ``dataset`` read with ``threads`` threads (and a read
    prefetch buffer of ``prefetch`` elements; 0: ``default_prefetch(threads)``) and
    ``workers`` worker processes, each holding up to ``per_worker_buffer`` batches ready
    (0 workers: everything in the calling process, as a loop without workers).

    ``dataset`` is a MapDataset or IterDataset of whole batches, :class:`BatchedExamples`
    or :class:`MainProcessMap`. ``stage_timing`` turns on Grain's STAGE_TIMING execution
    tracking (read it with ``grain_stage_summary``). With ``shm_tag`` (see
    ``new_shm_tag``) the workers name their shared-memory segments with it, so a failed run
    can reclaim exactly its own (``reclaim_shared_memory``).
    """
    import grain

    if isinstance(dataset, MainProcessMap):
        inner = build_iter_dataset(dataset.dataset, workers, threads, stage_timing=stage_timing,
                                   worker_init_fn=worker_init_fn,
                                   per_worker_buffer=per_worker_buffer, prefetch=prefetch,
                                   shm_tag=shm_tag)
        return inner.map(dataset.fn)
    ensure_absl_flags_parsed()
    prefetch = prefetch or default_prefetch(threads)
    if is_data_loader(dataset):  # its own workers; Grain's stage timing cannot see inside
        return with_settings(dataset, workers, threads, per_worker_buffer, prefetch)
    read = grain.ReadOptions(num_threads=threads, prefetch_buffer_size=prefetch)
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
        if shm_tag is not None:
            worker_init_fn = TagSharedMemory(shm_tag, worker_init_fn)
        ds = ds.mp_prefetch(
            grain.MultiprocessingOptions(
                num_workers=workers, per_worker_buffer_size=per_worker_buffer
            ),
            worker_init_fn=worker_init_fn,
        )
    return ds


def grain_stage_summary(iterator: Iterator[Any]) -> ExecutionSummary:
    """Grain's execution summary (a proto) of an iterator built with ``stage_timing``."""
    from grain._src.python.dataset import dataset as grain_dataset

    return grain_dataset.get_execution_summary(iterator)


# --- stall timeout and worker clean-up -------------------------------------------------------
class PipelineStalled(BaseException):
    """Raised in the main thread when no batch arrived for ``timeout_s``.

    A BaseException (like KeyboardInterrupt) so that no ``except Exception`` inside the
    pipeline swallows it."""


class StallTimer:
    """``arm()`` (re)starts a SIGALRM timer of ``timeout_s``; firing raises PipelineStalled.

    Only in the main thread (signals); elsewhere, or with ``timeout_s`` <= 0, it does nothing.
    """

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s or 0.0
        self.active = (self.timeout_s > 0
                       and threading.current_thread() is threading.main_thread())
        self._previous: Callable[[int, FrameType | None], Any] | int | signal.Handlers | None \
            = None

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        raise PipelineStalled()

    def __enter__(self) -> StallTimer:
        if self.active:
            self._previous = signal.signal(signal.SIGALRM, self._fire)
        return self

    def arm(self) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, self.timeout_s)

    def disarm(self) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)


def worker_pids() -> set[int]:
    """Pids of this process's live multiprocessing children (Grain's workers among them)."""
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def stop_workers(keep: set[int], wait_s: float = WORKER_EXIT_WAIT_S) -> None:
    """Terminate (then kill) every multiprocessing child not in ``keep``."""
    procs = [p for p in multiprocessing.active_children() if p.pid not in keep]
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + wait_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)


def flush_shared_memory_unlinks(timeout_s: float = 5.0) -> None:
    """Wait until Grain's background thread has unlinked the shared memory of batches that
    were dropped (it deletes asynchronously; exiting first leaves them to the resource
    tracker, which warns about "leaked shared_memory objects")."""
    try:
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


def close_iterator(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


SHM_DIR = "/dev/shm"


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
    process (its private name generator, the one place pipecheck touches it; a Python
    without it keeps its own names and nothing is reclaimed)."""
    if not hasattr(shared_memory, "_make_filename"):  # pragma: no cover - Python changed
        return

    def tagged_filename() -> str:
        return f"/psm_{tag}{secrets.token_hex(6)}"

    shared_memory._make_filename = tagged_filename  # type: ignore[attr-defined]


def reclaim_shared_memory(tag: str) -> int:
    """Unlink the segments this pipeline's workers (tagged ``tag``) left behind.

    Batches a worker had written to shared memory when the run stopped (it raised, or the run
    simply had its batches and stopped reading) are never received, so nobody unlinks them (the
    resource tracker would, at exit, with a "leaked shared_memory objects" warning). A batch
    still in use keeps its mapping: unlinking removes only the name. Only segments named with
    this pipeline's tag are touched: other processes' segments (another pipecheck, a peer
    host's pipeline on the same machine, any Grain user) are not ours to delete. Called only
    after the workers are stopped and the iterators closed and flushed. Returns how many were
    reclaimed.
    """
    try:
        names = sorted(n for n in os.listdir(SHM_DIR) if n.startswith(f"psm_{tag}"))
    except OSError:
        return 0
    reclaimed = 0
    for name in names:
        try:
            segment = shared_memory.SharedMemory(name=name)
        except (FileNotFoundError, OSError):
            continue
        try:
            segment.close()
            segment.unlink()  # also unregisters it from the resource tracker
            reclaimed += 1
        except (FileNotFoundError, OSError):
            pass
    return reclaimed


ITERATOR_COLLECT_WAIT_S = 5.0
"""How long a closed iterator may stay alive after clean-up (a Grain prefetch thread's
pending task can hold it a moment) before shared memory is flushed without it."""


def wait_collected(refs: list[weakref.ref[Any]], wait_s: float = ITERATOR_COLLECT_WAIT_S,
                   poll_s: float = 0.02) -> bool:
    """Collect garbage until every referent of ``refs`` is gone (or ``wait_s`` passed).

    A closed iterator that is collected late drains its queue then, unlinking the shared
    memory of batches that arrived while it closed; flushing or reclaiming before that
    would race with it. Returns whether they are all gone."""
    deadline = time.monotonic() + wait_s
    while True:
        gc.collect()
        if all(r() is None for r in refs):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def release(iterators: list[Any], before: set[int], failed: bool,
            shm_tag: str | None = None) -> None:
    """Close pipeline iterators and stop every worker started since ``before``.

    After a failure or stall the workers are stopped first: ``close()`` would wait 25 s for
    a stuck or failed worker. Shared memory is released before returning, so nothing is
    reported as leaked at exit.
    """
    if failed:
        stop_workers(before)
    for iterator in iterators:
        try:
            close_iterator(iterator)
        except Exception:  # noqa: BLE001 - closing a failed pipeline is best effort
            pass
    # The loop variable would keep the last iterator alive past the wait below (it waited
    # its whole ITERATOR_COLLECT_WAIT_S for every setting).
    del iterator
    gone = [weakref.ref(it) for it in iterators]
    iterators.clear()  # the last references: their shared memory must be freed below
    stop_workers(before)
    wait_collected(gone)  # Grain iterators left to the interpreter's shutdown log errors
    flush_shared_memory_unlinks()
    if shm_tag is not None:
        reclaim_shared_memory(shm_tag)


def stall_error(label: str, timeout_s: float | None, arrived: int) -> PipelineStallError:
    """The one message for a pipeline that stopped producing (``arrived`` batches came)."""
    what = "the first batch" if arrived <= 0 else f"batch {arrived + 1} (after {arrived} arrived)"
    return PipelineStallError(
        f"the input pipeline ({label}) produced no batch for {timeout_s or 0:g} s while "
        f"waiting for {what}; it looks stuck (a hung read or transform). Raise --timeout if "
        "it is only slow")


@contextlib.contextmanager
def open_batches(dataset: Any, workers: int, threads: int, *,
                 timeout_s: float | None = None,
                 per_worker_buffer: int = DEFAULT_PER_WORKER_BUFFER,
                 prefetch: int = 0) -> Iterator[Iterator[Any]]:
    """The pipeline's batches for a training loop, cleaned up whatever happens.

    Every ``next()`` is guarded by the stall timer (``timeout_s``; main thread only). A
    failure inside the pipeline (a worker's exception, a stall, running out) becomes one
    PipelineError naming the setting; errors raised by the loop's own code pass through
    unchanged. On exit the iterator is closed and every worker process it started is
    stopped, also on Ctrl-C.
    """
    label = f"workers={workers}, threads={threads}"
    before = worker_pids()
    shm_tag = new_shm_tag()
    opened = [iter(build_iter_dataset(dataset, workers, threads,
                                      per_worker_buffer=per_worker_buffer, prefetch=prefetch,
                                      shm_tag=shm_tag))]
    failure: list[BaseException] = []

    def guarded(timer: StallTimer) -> Iterator[Any]:
        n = 0
        while True:
            timer.arm()
            try:
                batch = next(opened[0])
            except StopIteration:
                return
            except PipelineStalled:
                failure.append(stall_error(label, timeout_s, arrived=n))
                raise
            except Exception as e:  # noqa: BLE001 - a worker's or transform's exception
                failure.append(pipeline_error(e, label))
                raise
            finally:
                timer.disarm()
            n += 1
            yield batch

    batches: Any = None
    try:
        with StallTimer(timeout_s) as timer:
            batches = guarded(timer)
            yield batches
    except BaseException:
        if not failure:
            raise
    finally:
        if batches is not None:
            batches.close()  # its frame would keep the iterator (and shared memory) alive
        release(opened, before, failed=bool(failure), shm_tag=shm_tag)
    if failure:
        raise failure[0] from None
