"""Running a workload's Grain pipeline for a loop: every ``next()`` guarded by a stall timer,
and on the way out the iterator closed, every worker process it started stopped and its
shared memory released (``open_batches``). The pipeline itself is built by
``data/grain_pipeline.build_iter_dataset``."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
import weakref
from multiprocessing import shared_memory
from types import FrameType
from typing import Callable, Generator, Iterator, Sequence, TypeVar

from pipecheck.data.grain_pipeline import (
    InputPipeline,
    build_iter_dataset,
    flush_shared_memory_unlinks,
    new_shm_tag,
)
from pipecheck.data.per_setting import at_setting
from pipecheck.errors import PipelineStallError
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.step_types import Batch
from pipecheck.user_code import pipeline_error

WORKER_EXIT_WAIT_S = 3.0
"""How long a terminated worker gets to exit before it is killed."""


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
        self._previous: Callable[[int, FrameType | None], object] | int | signal.Handlers \
            | None = None

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


def close_iterator(iterator: object) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


SHM_DIR = "/dev/shm"


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


T = TypeVar("T")
"""What a weak reference refers to."""

ITERATOR_COLLECT_WAIT_S = 5.0
"""How long a closed iterator may stay alive after clean-up (a Grain prefetch thread's
pending task can hold it a moment) before shared memory is flushed without it."""


def wait_collected(refs: Sequence[weakref.ref[T]], wait_s: float = ITERATOR_COLLECT_WAIT_S,
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


def release(iterators: list[Iterator[Batch]], before: set[int], failed: bool,
            shm_tag: str | None = None) -> None:
    """Close pipeline iterators and stop every worker started since ``before``.

    After a failure or stall the workers are stopped first: ``close()`` would wait 25 s for
    a stuck or failed worker. Shared memory is released before returning, so nothing is
    reported as leaked at exit.
    """
    if failed:
        stop_workers(before)
    for i in range(len(iterators)):  # indexed: a loop variable would keep the last
        try:                             # iterator alive past the wait below
            close_iterator(iterators[i])
        except Exception:  # noqa: BLE001 - closing a failed pipeline is best effort
            pass
    gone = [weakref.ref(it) for it in iterators]
    iterators.clear()  # the last references: their shared memory must be freed below
    stop_workers(before)
    wait_collected(gone)  # Grain iterators left to the interpreter's shutdown log errors
    flush_shared_memory_unlinks()
    if shm_tag is not None:
        reclaim_shared_memory(shm_tag)


def stall_error(label: str, timeout_s: float | None, arrived: int) -> PipelineStallError:
    """The error for a pipeline that stopped producing (``arrived`` batches came)."""
    what = "the first batch" if arrived <= 0 else f"batch {arrived + 1} (after {arrived} arrived)"
    return PipelineStallError(
        f"the input pipeline ({label}) produced no batch for {timeout_s or 0:g} s while "
        f"waiting for {what}; it looks stuck (a hung read or transform). Raise --timeout if "
        "it is only slow")


@contextlib.contextmanager
def open_batches(dataset: InputPipeline, settings: GrainSettings, *,
                 timeout_s: float | None = None) -> Iterator[Iterator[Batch]]:
    """The pipeline's batches for a training loop, cleaned up whatever happens.

    Every ``next()`` is guarded by the stall timer (``timeout_s``; main thread only). A
    failure inside the pipeline (a worker's exception, a stall, running out) becomes one
    PipelineError naming the setting; errors raised by the loop's own code pass through
    unchanged. On exit the iterator is closed and every worker process it started is
    stopped, also on Ctrl-C.
    """
    label = f"workers={settings.workers}, threads={settings.threads}"
    before = worker_pids()
    shm_tag = new_shm_tag()
    opened = [iter(build_iter_dataset(at_setting(dataset, settings), settings,
                                      shm_tag=shm_tag))]
    failure: list[BaseException] = []

    def guarded(timer: StallTimer) -> Generator[Batch, None, None]:
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

    batches: Generator[Batch, None, None] | None = None
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
