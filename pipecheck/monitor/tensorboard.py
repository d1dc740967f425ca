"""A Monitor's per-step scalars as TensorBoard events (``Monitor(tensorboard_dir=...)``).

Each step's time, data wait, sync wait and dispatch (seconds) go to an event file in
``tensorboard_dir`` as the scalars ``SCALAR_TAGS`` names, at TensorBoard step = the step's
number, with the step's end as wall time. Nothing is added to the loop's hot path: the
recorder hands each fold's new steps (immutable columns) to ``ScalarWriter.take``, which only
queues them; a thread of its own turns them into events (``event_file.scalar_events``:
protobuf's wire format laid out by numpy, a run of steps at a time, each batch's first event
read back by tensorboardX's ``Event`` class before it is written), appends them to the event
file and flushes it after each batch, so a killed process keeps every scalar handed over
before the kill. The loop folds at least every
``TENSORBOARD_EVERY_S`` seconds for this (at a mark, as for ``save_to``'s writes).
tensorboardX is imported only when a ``tensorboard_dir`` is given.
"""

from __future__ import annotations

import atexit
import math
import os
import queue
import struct
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from pipecheck.errors import MonitorError
from pipecheck.monitor.event_file import EventFile, scalar_events
from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable

if TYPE_CHECKING:  # pragma: no cover
    from tensorboardX.proto.event_pb2 import Event

TENSORBOARD_EVERY_S = 5.0
"""Default interval of the folds that hand steps to the event file: a run killed by SIGKILL
(or a SIGTERM without ``save_to``) loses at most this many seconds of scalars, and
TensorBoard, which reloads every 5 s, shows a step at most about twice this after it ended."""

SCALAR_TAGS: Mapping[str, str] = {
    "time_s": "pipecheck/step_time_s",
    "data_wait": "pipecheck/data_wait_s",
    "sync": "pipecheck/sync_wait_s",
    "dispatch": "pipecheck/dispatch_s",
}
"""The scalars written per step: the step record's field (``time_s``) or span, and its tag."""

INSTALL_HINT = "pip install 'pipecheck[tensorboard]'"
"""What installs tensorboardX, the one optional package `tensorboard_dir` needs."""

CLOSE_TIMEOUT_S = 30.0
"""How long the end of a run waits for the writer thread to write what it was handed."""


def event_class() -> type[Event]:
    """tensorboardX's ``Event`` protobuf class, or a one-line error naming the install
    command."""
    try:
        # lazy: tensorboardX is optional, imported only for Monitor(tensorboard_dir=...)
        from tensorboardX.proto.event_pb2 import Event
    except ImportError:
        raise MonitorError(
            f"Monitor(tensorboard_dir=...) needs tensorboardX, which is not installed: "
            f"{INSTALL_HINT}") from None
    return Event


class EncodingError(ValueError):
    """An event read back differs from its step: the writer stops (never a wrong file)."""


StepColumns = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(steps, wall times of their ends, values: a row per step, a column per ``SCALAR_TAGS``
tag, NaN where the step has no such span)."""


def step_columns(table: StepTable[StepRecord], wall_start: float) -> StepColumns:
    """Pure: the scalars of ``table``'s steps (consecutive intervals, the first opened at
    wall time ``wall_start``)."""
    time_s = np.asarray(table.column("time_s"), np.float64)
    columns = {"time_s": time_s, **table.map_columns("spans")}
    values = np.full((len(time_s), len(SCALAR_TAGS)), np.nan)
    for j, name in enumerate(SCALAR_TAGS):
        if name in columns:
            values[:, j] = columns[name]
    steps = np.asarray(table.column("step"), np.int64)
    return steps, wall_start + np.cumsum(time_s), values


def check_event(event_type: type[Event], data: bytes, columns: StepColumns) -> str | None:
    """What differs between the first event of ``data`` (TFRecord bytes) as tensorboardX's
    ``Event`` reads it and the first step of ``columns`` (None: nothing)."""
    (length,) = struct.unpack("<Q", data[:8])
    event = event_type.FromString(data[12:12 + length])
    steps, walls, values = columns
    first = zip(SCALAR_TAGS.values(), values[0], strict=True)
    want = {tag: float(np.float32(v)) for tag, v in first if not math.isnan(v)}
    got = {v.tag: v.simple_value for v in event.summary.value}
    if (event.step, event.wall_time, got) != (int(steps[0]), float(walls[0]), want):
        return f"step {event.step}, wall time {event.wall_time}, {got} read back"
    return None


def check_logdir(logdir: str) -> None:
    """Fail before the run if ``logdir`` is a file or cannot be created."""
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise MonitorError(f"Monitor(tensorboard_dir={logdir!r}): that is a file, not a "
                           "directory; give a directory")
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as e:
        raise MonitorError(f"Monitor(tensorboard_dir={logdir!r}): cannot create it "
                           f"({e.strerror or type(e).__name__}); choose another directory"
                           ) from None


_STOP = object()


class ScalarWriter:
    """The event file of one Monitor run and the thread that writes it.

    ``take`` (the recorder's ``on_steps`` hook) queues a fold's steps; the thread writes
    them as one event per step (a summary of its scalars) and flushes the file. ``drain``
    waits until what was queued is on disk; ``close`` drains and closes the file."""

    def __init__(self, logdir: str, every_s: float = TENSORBOARD_EVERY_S,
                 suffix: str = "") -> None:
        if not every_s > 0:
            raise MonitorError(f"tensorboard_every_s must be > 0, got {every_s!r}")
        self._event = event_class()  # the install hint before the run
        check_logdir(logdir)
        self.logdir = logdir
        self.every_s = every_s
        self.next_at = math.inf
        """Clock reading from which the next fold for the event file is due."""
        self._suffix = suffix or f".pipecheck-{os.getpid()}"
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # put: reentrant
        self._thread: threading.Thread | None = None
        self._file: EventFile | None = None
        self._wall_end = 0.0
        self.steps_written = 0
        self._broken = False
        """A write failed in a way the next cannot mend (its steps are gone): none follows."""
        self.warned: str | None = None
        self._fold_at_exit: Callable[[], None] = lambda: None
        self.path: str | None = None
        """The event file, once opened (``start``)."""

    def start(self, wall_start: float, now: float,
              fold: Callable[[], None] = lambda: None) -> None:
        """Open the event file and start the thread; ``wall_start``: the wall time the run's
        first interval opened; ``now``: the loop's clock reading (the first fold is due
        ``every_s`` later); ``fold``: what hands the last steps over when the process exits
        without ``close`` (the Monitor's fold)."""
        self._fold_at_exit = fold
        self._wall_end = wall_start
        self.next_at = now + self.every_s
        first = self._event(wall_time=time.time(), file_version="brain.Event:2")
        self._file = EventFile(self.logdir, self._suffix, first.SerializeToString())
        self.path = self._file.path
        self._thread = threading.Thread(target=self._run, name="pipecheck-tensorboard",
                                        daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        self._fold_at_exit()
        self.close()

    def take(self, table: StepTable[StepRecord]) -> None:
        """Queue a fold's new steps (on the folding thread: nothing else is done here)."""
        self._queue.put(table)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, threading.Event):
                item.set()
            elif not self._broken:
                self._write(item)

    def _write(self, table: StepTable[StepRecord]) -> None:
        file = self._file
        assert file is not None
        try:
            columns = step_columns(table, self._wall_end)
            if not len(columns[0]):
                return
            self._wall_end = float(columns[1][-1])  # the next batch's start, written or not
            data = scalar_events(columns[0], columns[1], tuple(SCALAR_TAGS.values()),
                                 columns[2])
            wrong = check_event(self._event, data, columns)
            if wrong is not None:
                raise EncodingError(f"an event encoded wrong ({wrong}); nothing more is "
                                    "written")
            file.write_framed(data)  # flushed: a kill of the process keeps it
            self.steps_written += len(columns[0])
        except Exception as e:  # noqa: BLE001 - a failed write must not end the user's run
            self._broken = isinstance(e, EncodingError)
            if self.warned is None:
                self.warned = (f"pipecheck: could not write TensorBoard scalars to "
                               f"{self.logdir} ({type(e).__name__}: {e}); the run goes on")
                warnings.warn(self.warned, RuntimeWarning, stacklevel=2)

    def drain(self, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Wait until every step queued so far is written and flushed (True), or
        ``timeout_s``."""
        thread = self._thread
        if thread is None or not thread.is_alive() or thread is threading.current_thread():
            return False
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout_s)

    def close(self) -> None:
        """Write what was queued, stop the thread, close the file (again: nothing)."""
        thread, self._thread = self._thread, None
        atexit.unregister(self._at_exit)
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(CLOSE_TIMEOUT_S)
        file, self._file = self._file, None
        if file is not None:
            file.close()


def wall_start_of(start_reading: float, now: float) -> float:
    """The wall time at which a clock reading ``start_reading`` was taken, the clock now
    reading ``now``."""
    return time.time() - (now - start_reading)

