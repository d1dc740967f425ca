"""Work done in a forked child process while this process goes on: the child's result (or
its error) comes back pickled through a pipe.

``why_not_fork`` says when a fork is not safe or cannot help (no ``os.fork``, one usable
CPU, JAX imported, a second thread running); callers then do the work here. The child
shows nothing and never writes to the terminal (its stdout and stderr are /dev/null). It
is always reaped: after an error or a Ctrl-C in this process it is killed first. A Ctrl-C
to the process group ends the child at once (it takes SIGINT's default action), and a
parent killed outright takes the child with it (Linux's ``PR_SET_PDEATHSIG``; elsewhere
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
from typing import BinaryIO, Callable, Generic, Iterator, TypeVar, TypeVarTuple

from pipecheck.errors import PipecheckError, one_line
from pipecheck.host_cpus import usable_cores

try:
    import fcntl
except ImportError:  # not POSIX: no os.fork either, so no pipe to widen
    fcntl = None  # type: ignore[assignment]

PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal a process gets when its parent dies."""

_OK, _ERROR = "ok", "error"

_LIVE: set[int] = set()
"""The children of this process started and not reaped yet."""

_IN_CHILD = False
"""This process is itself a forked child (it forks no other: its parent works beside it)."""


def why_not_fork() -> str | None:
    """Why work must not go to a forked child here, or None when it may: one child at a
    time per CPU beyond this process's, none from a child."""
    if not hasattr(os, "fork"):
        return "no os.fork on this platform"
    if usable_cores() < 2:
        return "one CPU"
    if _IN_CHILD:
        return "a forked child itself (its parent works beside it)"
    if len(_LIVE) >= usable_cores() - 1:
        return "a forked child already works beside this process on every other CPU"
    if "jax" in sys.modules:
        return "JAX is imported (forking after it started is unsafe)"
    if threading.active_count() > 1:
        return "another thread is running (forking with threads is unsafe)"
    return None


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT blocked within: a Ctrl-C meanwhile is raised (KeyboardInterrupt) once it ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


R = TypeVar("R")
"""What the child's work returns."""
Args = TypeVarTuple("Args")
"""The work's arguments."""


class Child(Generic[R]):
    """``work(*args)`` in a forked child; ``result`` waits for what it returned (or raises
    its error), ``reap`` ends and waits for the child, whatever happened. ``path``: what
    the child works on, for messages."""

    def __init__(self, path: str, pid: int, pipe: BinaryIO) -> None:
        self.path, self.pid, self._pipe = path, pid, pipe
        self._ending = False
        """True once the child closed its end of the pipe: it ends by itself."""
        self._status: int | None = None

    @classmethod
    def run(cls, path: str, work: Callable[[*Args], R], *args: *Args) -> Child[R]:
        """Fork a child that returns ``work(*args)``. Call it with SIGINT held
        (``sigint_held``) and the child assigned inside, so a Ctrl-C cannot leave it
        unreaped."""
        parent = os.getpid()
        r, w = os.pipe()
        _widen(w)
        # Flushed before the fork, so no buffered output is written twice.
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(r)
            _child_main(path, work, args, w, parent)
        os.close(w)
        _LIVE.add(pid)
        return cls(path, pid, os.fdopen(r, "rb"))

    def result(self) -> R:
        """What the child's work returned; its error raised here; KeyboardInterrupt if a
        Ctrl-C ended it."""
        try:
            kind, value = pickle.load(self._pipe)
        except (EOFError, pickle.UnpicklingError):
            self._ending = True
            self.reap()
            raise self._no_result() from None
        self._ending = True
        if kind == _ERROR:
            raise value
        return value

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
            if not self._ending:  # still working: this process stopped waiting for it
                _kill_unless_done(self.pid)
            self._status = os.waitpid(self.pid, 0)[1]
            _LIVE.discard(self.pid)


PIPE_BYTES = 1 << 20
"""The pipe's capacity asked for (Linux's default limit for an unprivileged process,
``/proc/sys/fs/pipe-max-size``): a million-step summary crosses it in ~50 writes, not
~750 of the default 64 KiB."""


def _widen(fd: int) -> None:
    """Ask for a pipe of ``PIPE_BYTES`` where the system can (Linux); keep it as it is
    elsewhere or when refused."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if fcntl is None or set_size is None:
        return
    try:
        fcntl.fcntl(fd, set_size, PIPE_BYTES)
    except OSError:
        pass


def _kill_unless_done(pid: int) -> None:
    """SIGKILL ``pid``; it may have exited meanwhile (still a zombie: the pid is ours)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child_main(path: str, work: Callable[[*Args], object], args: tuple[*Args], w: int,
                parent: int) -> None:
    """The child's whole life: run ``work(*args)``, send ``(kind, value)`` down ``w``, leave
    with ``os._exit`` (no atexit handlers, no flushing of the parent's buffers)."""
    global _IN_CHILD
    code = 1
    try:
        _IN_CHILD = True
        _LIVE.clear()
        _detach(parent)
        try:
            message: tuple[str, object] = (_OK, work(*args))
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
