"""Two runs read side by side: run B in a forked child process while this process reads run
A; B's ``RunSummary`` comes back pickled through a pipe.

``load_runs`` is what ``pipecheck diff`` reads its inputs with. Where a second process
cannot help or is not safe (``why_one_after_the_other``: one core, no ``os.fork``, JAX or a
second thread already running, small inputs, a result JSON) it reads them one after the
other with ``load_run``, as ``diff`` always did. Either way the summaries are the same,
and so is any error: A's first, then B's, of its own type with its own message.

The child shows no progress and never writes to the terminal (its stdout and stderr are
/dev/null); this process shows B's read as a bar of its own, filled when B arrives. The
child is always reaped: after an error or a Ctrl-C in this process it is killed first. A
Ctrl-C to the process group ends the child at once (it takes SIGINT's default action), and
a parent killed outright takes the child with it (Linux's ``PR_SET_PDEATHSIG``; elsewhere
the child ends when it finds the pipe closed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
import threading
import traceback
from typing import Any, BinaryIO, Iterator

from pipecheck.errors import PipecheckError, one_line
from pipecheck.logs.runs import is_result_file, load_run
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.diff import RunSummary

SIDE_BY_SIDE_MIN_BYTES = 4 << 20
"""Both inputs must be MaxText logs of at least this size (4 MiB, ~20,000 steps) to read B
in a second process. ``benchmarks/side_by_side.py`` on the shared 2-core machine: the
fork, hand-back and reaping cost 7-15 ms; side by side took 1.3-1.6x the time of one
after the other up to 1 MiB logs, 0.7-1.1x at 2 MiB, 0.73-0.75x at 4 MiB, 0.65-0.69x
from 6 MiB on: from 4 MiB it won every time. A pipecheck result (JSON) never goes to the
child: it reads in about the time its summary takes to come back (a 1M-step record, 17
MB, 0.35 s against 0.3 s for the hand-back; 0.98 s side by side against 0.70 s)."""

PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal a process gets when its parent dies."""

_OK, _ERROR = "ok", "error"


def why_one_after_the_other(a: str | os.PathLike[str], b: str | os.PathLike[str],
                            min_bytes: int = SIDE_BY_SIDE_MIN_BYTES) -> str | None:
    """Why A and B are to be read one after the other, or None to read them side by side."""
    if not hasattr(os, "fork"):
        return "no os.fork on this platform"
    if usable_cpus() < 2:
        return "one CPU"
    if "jax" in sys.modules:
        return "JAX is imported (forking after it started is unsafe)"
    if threading.active_count() > 1:
        return "another thread is running (forking with threads is unsafe)"
    try:
        smaller = min(os.path.getsize(a), os.path.getsize(b))
        if smaller < min_bytes:
            return f"an input is under {min_bytes:,} bytes"
        if is_result_file(a) or is_result_file(b):
            return "an input is a pipecheck result (JSON): quicker read here than handed back"
    except (OSError, PipecheckError):
        return "an input cannot be read (load_run says why)"
    return None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_runs(a: str | os.PathLike[str], b: str | os.PathLike[str],
              progress: Progress = NO_PROGRESS,
              min_bytes: int | None = None) -> tuple[RunSummary, RunSummary]:
    """``(load_run(a), load_run(b))``, B read in a second process when it helps and is safe
    (``min_bytes``: ``SIDE_BY_SIDE_MIN_BYTES`` unless given)."""
    limit = SIDE_BY_SIDE_MIN_BYTES if min_bytes is None else min_bytes
    if why_one_after_the_other(a, b, limit) is not None:
        return load_run(a, progress), load_run(b, progress)
    child: ChildRead | None = None
    try:
        with sigint_held():  # a Ctrl-C lands once ``child`` is set, so it is reaped
            child = ChildRead.start(b)
        size = os.path.getsize(b)
        # A bar (drawn on a terminal only), so a piped stderr holds what it always did.
        with progress.task(f"reading {os.path.basename(str(b))} alongside, in a second "
                           "process", size, "B") as task:
            run_a = load_run(a, progress)
            run_b = child.result()
            task.advance(size)
    finally:
        if child is not None:
            child.reap()
    return run_a, run_b


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT blocked within: a Ctrl-C meanwhile is raised (KeyboardInterrupt) once it ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class ChildRead:
    """``load_run(path)`` in a forked child; ``result`` waits for its summary (or raises its
    error), ``reap`` ends and waits for the child, whatever happened."""

    def __init__(self, path: str, pid: int, pipe: BinaryIO) -> None:
        self.path, self.pid, self._pipe = path, pid, pipe
        self._ending = False
        """True once the child closed its end of the pipe: it ends by itself."""
        self._status: int | None = None

    @classmethod
    def start(cls, path: str | os.PathLike[str]) -> ChildRead:
        parent = os.getpid()
        r, w = os.pipe()
        # Flushed before the fork, so no buffered output is written twice.
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(r)
            _child_main(str(path), w, parent)
        os.close(w)
        return cls(str(path), pid, os.fdopen(r, "rb"))

    def result(self) -> RunSummary:
        """B's summary; its error raised here; KeyboardInterrupt if a Ctrl-C ended it."""
        try:
            kind, value = pickle.load(self._pipe)
        except (EOFError, pickle.UnpicklingError):
            self._ending = True
            self.reap()
            raise self._no_result() from None
        self._ending = True
        if kind == _ERROR:
            raise value
        run: RunSummary = value
        return run

    def _no_result(self) -> BaseException:
        status = self._status or 0
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT:
            return KeyboardInterrupt()
        if os.WIFSIGNALED(status):
            how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            how = f"exited with status {os.waitstatus_to_exitcode(status)}"
        return PipecheckError(f"reading {self.path} in a second process failed: it {how} "
                              "without a result")

    def reap(self) -> None:
        """Kill the child unless it finished, and wait for it; Ctrl-C is held off meanwhile
        (it is raised once the child is gone), so no child outlives this call."""
        if self._status is not None:
            return
        self._pipe.close()
        with sigint_held():
            if not self._ending:  # still reading: this process stopped waiting for it
                _kill_unless_done(self.pid)
            self._status = os.waitpid(self.pid, 0)[1]


def _kill_unless_done(pid: int) -> None:
    """SIGKILL ``pid``; it may have exited meanwhile (still a zombie: the pid is ours)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child_main(path: str, w: int, parent: int) -> None:
    """The child's whole life: read ``path``, send ``(kind, value)`` down ``w``, leave with
    ``os._exit`` (no atexit handlers, no flushing of the parent's buffers)."""
    code = 1
    try:
        _detach(parent)
        try:
            message: tuple[str, Any] = (_OK, load_run(path))
        except BaseException as e:  # noqa: BLE001 -- every error goes back to the parent
            message = (_ERROR, portable(e, path))
        with os.fdopen(w, "wb") as out:
            pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)


def _detach(parent: int) -> None:
    """Make the child quiet and dependent: Ctrl-C ends it, it dies with its parent, and its
    stdout and stderr go nowhere."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held over the fork
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def portable(e: BaseException, path: str) -> BaseException:
    """``e`` as it can travel to the parent: itself if it pickles, else a stand-in of the
    nearest kind (a ``PipecheckError`` with the same message and exit code, or a
    RuntimeError naming the type). Either carries the child's stack as a note, which the
    CLI prints with --traceback only."""
    stack = "".join(traceback.format_exception(e))
    try:
        out: BaseException = pickle.loads(pickle.dumps(e, pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 -- any failure to pickle: send a stand-in
        if isinstance(e, PipecheckError):
            out = PipecheckError(str(e))
            out.exit_code = e.exit_code
        else:
            out = RuntimeError(f"{type(e).__name__}: {one_line(e)}")
    out.add_note(f"(raised while reading {path} in a second process:\n{stack})")
    return out
