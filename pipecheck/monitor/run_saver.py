"""Keeping a run's record on disk while it goes: periodic atomic writes off the loop's
thread, one last write when the run ends (or ends early), and signals chained.

- ``PeriodicWriter``: the loop hands it a captured state (cheap: immutable arrays and
  copies of small tables) when ``due``; a writer thread builds the record from it, encodes
  it (``records.steps.ChunkEncoder``: only step columns new since the last write are
  compressed) and writes it atomically (temporary file, fsync, rename). A write that fails
  (disk full, path gone) warns once and the loop goes on; the next write tries again.
- ``SignalChain``: on SIGTERM or SIGINT, a callback runs first (the Monitor's last write),
  then the handler that was installed before (the user's, JAX's, Python's
  ``KeyboardInterrupt``), or, where that was the default action, the signal is delivered
  again with the default restored, so the process ends as it would have. A signal the
  process ignored stays ignored.
- ``RunKeeper``: the two for one Monitor, with ``sys.excepthook`` and ``atexit`` chained
  too: whichever ends the run first (a signal, an exception that ends the script, the
  process's exit without ``finish``) tells the Monitor how (``ended``), which writes the
  record marked ``incomplete`` (``write_early``).
"""

from __future__ import annotations

import atexit
import glob
import os
import signal
import sys
import threading
import time
import warnings
from types import FrameType, TracebackType
from typing import Callable, Generic, TypeVar

from pipecheck.errors import MonitorError, PipecheckError
from pipecheck.measure.faults import describe
from pipecheck.monitor.result import RunState
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult, RunEnd

SAVE_EVERY_S = 30.0
"""Default interval of ``Monitor(save_to=...)``'s writes: a killed run loses at most this
much, and a write (tens of ms on the writer thread for a 10,000-step window) costs well
under 1% of it (benchmarks/monitor_overhead.py)."""

RUNNING_MESSAGE = "written while the run was going; it ended before its next write or goes on"
"""What a periodic write says of the run (a process killed by SIGKILL leaves this file)."""

S = TypeVar("S")
V = TypeVar("V")


def check_save_to(path: str, every_s: float, force: bool) -> None:
    """Refuse ``Monitor(save_to=path)`` before the run, not at its end: an interval that is
    not positive, an existing file without ``force``, a path that cannot be written."""
    if not every_s > 0:
        raise MonitorError(f"Monitor(save_every_s=...) must be > 0 seconds, got {every_s!r}")
    if os.path.exists(path) and not force and not os.path.isdir(path):
        raise MonitorError(f"Monitor(save_to={path!r}): the file exists; pass force=True to "
                           "replace it, or choose another path")
    store.check_writable(path, force)


def remove_stale_temporaries(path: str) -> list[str]:
    """Delete the temporary files an earlier process left next to ``path`` when it was
    killed (SIGKILL) in the middle of a write; return their names."""
    directory, name = os.path.split(os.path.abspath(path))
    found = glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(name)}.*.tmp"))
    for f in found:
        try:
            os.unlink(f)
        except OSError:
            pass
    return found


class PeriodicWriter(Generic[S, V]):
    """Writes ``encode(build(state))`` (``build`` makes a ``V`` of a state ``S``) to ``path``
    atomically, on a thread of its own for the periodic writes (``submit``) and on the
    caller's for the last one (``write_now``)."""

    def __init__(self, path: str, build: Callable[[S], V], encode: Callable[[V], str],
                 every_s: float = SAVE_EVERY_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if not every_s > 0:
            raise ValueError(f"save_every_s must be > 0, got {every_s!r}")
        self.path = path
        self.every_s = every_s
        self.next_at = float("-inf")
        """Clock reading from which the next periodic write is due (the first: at once)."""
        self._build = build
        self._encode = encode
        self._clock = clock
        self._lock = threading.RLock()  # one write at a time (reentrant: a signal handler)
        self._cond = threading.Condition(threading.RLock())
        self._pending: S | None = None
        self._stopped = False
        self._final = False
        self._thread: threading.Thread | None = None
        self.warned: str | None = None
        """The message of the failed write that was warned about (once per writer)."""
        self.writes = 0
        self.write_s = 0.0
        """Seconds spent building, encoding and writing (every write)."""

    def submit(self, state: S, now: float) -> None:
        """Hand a state to the writer thread (a newer one replaces one not written yet)."""
        self.next_at = now + self.every_s
        with self._cond:
            if self._final or self._stopped:
                return
            self._pending = state
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pipecheck-save",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stopped:
                    self._cond.wait()
                if self._pending is None:
                    return
                state, self._pending = self._pending, None
            with self._lock:
                if not self._final:
                    self._write(state)

    def write_now(self, state: S, final: bool = True) -> bool:
        """Write ``state`` now, on this thread (after any write under way); with ``final``,
        no periodic write comes after it. True when the file was written."""
        with self._cond:
            self._pending = None
            self._final = self._final or final
        with self._lock:
            return self._write(state)

    def _write(self, state: S) -> bool:
        t0 = time.perf_counter()
        try:
            text = self._encode(self._build(state))
            store.write_text_atomic(self.path, text, force=True, fsync=True)
        except OSError as e:
            self._warn(f"pipecheck: could not write the run's record to {self.path} "
                       f"({e.strerror or type(e).__name__}); the run goes on, the next write "
                       "tries again")
            return False
        except PipecheckError as e:
            self._warn(f"pipecheck: could not write the run's record to {self.path} ({e}); "
                       "the run goes on, the next write tries again")
            return False
        except Exception as e:  # noqa: BLE001 - a bug here must not end the user's run
            self._warn(f"pipecheck: could not build the run's record for {self.path} "
                       f"({type(e).__name__}: {e}); the run goes on")
            return False
        finally:
            self.write_s += time.perf_counter() - t0
        self.writes += 1
        return True

    def _warn(self, message: str) -> None:
        if self.warned is None:
            self.warned = message
            warnings.warn(message, RuntimeWarning, stacklevel=2)

    def close(self) -> None:
        """Stop the writer thread (a write under way finishes first), then delete any
        temporary file a write of this path left: none is under way any more, so one that
        is there was cut short (the run's end interrupting a write) and is never renamed."""
        with self._cond:
            self._stopped = True
            self._pending = None
            self._cond.notify()
        if self._thread is threading.current_thread():
            return
        if self._thread is not None:
            self._thread.join()
        remove_stale_temporaries(self.path)


CHAINED_SIGNALS = ("SIGTERM", "SIGINT")
"""The signals on which a Monitor writes its record before the process ends (a scheduler's
preemption, Ctrl-C). SIGKILL cannot be caught: the last periodic file stands."""


SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers
"""A signal's handler as ``signal.getsignal`` gives it back (a function, SIG_DFL)."""

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]
"""``sys.excepthook``'s type."""


class SignalChain:
    """On each of ``CHAINED_SIGNALS``: ``on_signal(signum)``, then the previous handler."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self.on_signal = on_signal
        self._previous: dict[int, SignalHandler] = {}

    def install(self) -> SignalChain:
        """Install the handlers (only the main thread can; elsewhere nothing is installed).
        A signal whose handler was not set from Python (``getsignal`` is None) or that is
        ignored is left alone."""
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in CHAINED_SIGNALS:
            signum = getattr(signal, name)
            previous = signal.getsignal(signum)
            if previous is None or previous is signal.SIG_IGN:
                continue
            signal.signal(signum, self._handle)
            self._previous[signum] = previous
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        try:
            self.on_signal(signum)
        except Exception as e:  # noqa: BLE001 - the signal must reach its handler all the same
            print(f"pipecheck: could not save the run on {signal.Signals(signum).name}: {e}",
                  file=sys.stderr)
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
            return
        # the default action (end the process): restore it and deliver the signal again
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def uninstall(self) -> None:
        """Put the previous handlers back where ours is still the one installed."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, previous)
        self._previous = {}


StateAndEnd = tuple[RunState, RunEnd]
"""What a write of a run not finished is built from: the state, and how the run stands."""


class RunKeeper:
    """A Monitor's record kept at ``path`` while its loop runs: a ``PeriodicWriter``
    (``writer``: the loop submits ``(state, RunEnd("running", ...))`` when due, the end
    writes the finished record), and a ``SignalChain``, ``sys.excepthook`` and ``atexit``
    chained, each calling ``ended(kind, message)`` (``signal``, ``exception``, ``exit``)."""

    def __init__(self, path: str, every_s: float, clock: Callable[[], float],
                 build: Callable[[MonitorResult | StateAndEnd], MonitorResult],
                 encode: Callable[[MonitorResult], str],
                 ended: Callable[[str, str], None]) -> None:
        remove_stale_temporaries(path)
        self.writer: PeriodicWriter[MonitorResult | StateAndEnd, MonitorResult] = PeriodicWriter(
            path, build, encode, every_s, clock)
        self._ended = ended
        self._signals: SignalChain | None = SignalChain(self._on_signal).install()
        self._previous_excepthook: ExceptHook | None = sys.excepthook
        sys.excepthook = self.excepthook
        atexit.register(self.at_exit)

    def _on_signal(self, signum: int) -> None:
        self._ended("signal", signal.Signals(signum).name)

    def excepthook(self, exc_type: type[BaseException], exc: BaseException,
                   tb: TracebackType | None) -> None:
        """The record first, then the hook that was there (which prints the traceback)."""
        self._ended("exception", describe(exc))
        previous = self._previous_excepthook or sys.__excepthook__
        previous(exc_type, exc, tb)

    def at_exit(self) -> None:
        """What ``atexit`` runs when the script ends without ``finish``."""
        self._ended("exit", "the process exited before Monitor.finish()")

    def write_early(self, state: RunState, end: RunEnd) -> None:
        """Write the record of a run that ended early (``end``: how, at which step), now:
        the steps whose loss was observed, up to this moment; before its first step
        completed, nothing (and says so)."""
        if not len(state.snapshot.steps):
            print(f"pipecheck: the run ended ({end.message}) before its first step "
                  f"completed; nothing written to {self.writer.path}", file=sys.stderr)
            return
        self.writer.write_now((state, end))

    def stop(self) -> None:
        """Put back what was chained (where it is still ours), and stop the writer."""
        if self._signals is not None:
            self._signals.uninstall()
            self._signals = None
        if self._previous_excepthook is not None:
            if sys.excepthook == self.excepthook:
                sys.excepthook = self._previous_excepthook
            self._previous_excepthook = None
            atexit.unregister(self.at_exit)
        self.writer.close()
