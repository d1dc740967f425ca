"""Waiting for another process to reach a point, by what it says (a line on its output, a
line on a pipe of its own), never by how long it usually takes: the order of events in a
test is the same on a quiet machine and on a loaded one. Every wait has a generous
deadline; past it the process is stopped (so a blocked read returns) and the test fails
with a message naming what did not happen."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from typing import IO, Callable, Iterator

WAIT_S = 120.0
"""How long a test waits for another process to reach a point: far beyond what a loaded
machine takes, short of hanging a test run."""

HANDSHAKE_FD = "PIPECHECK_TEST_HANDSHAKE_FD"
"""The environment variable naming the pipe a helper script writes its handshake lines to
(``handshake_pipe``, ``tell``)."""


@contextlib.contextmanager
def deadline(stop: Callable[[], None], what: str, timeout_s: float = WAIT_S) -> Iterator[None]:
    """Within: ``stop()`` is called once ``timeout_s`` passed (it ends the process whose
    output the block reads, so the read returns), and the block then fails with
    ``what`` did not happen within ``timeout_s``."""
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        with contextlib.suppress(ProcessLookupError, OSError):
            stop()

    timer = threading.Timer(timeout_s, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except BaseException as e:
        if fired.is_set():
            raise AssertionError(f"{what}: not within {timeout_s:g} s (stopped)") from e
        raise
    finally:
        timer.cancel()
    if fired.is_set():
        raise AssertionError(f"{what}: not within {timeout_s:g} s (stopped)")


def lines_until(proc: subprocess.Popen[str], stream: IO[str], until: Callable[[str], bool],
                what: str, timeout_s: float = WAIT_S,
                stop: Callable[[], None] | None = None) -> list[str]:
    """The lines of ``stream`` (``proc``'s stdout or stderr, text) up to and with the first
    for which ``until`` is true. The process ending first, or ``timeout_s`` passing
    (``proc`` is then stopped: ``stop``, by default SIGABRT, which faulthandler answers
    with every thread's stack on stderr), fails the test."""
    lines: list[str] = []
    with deadline(stop or (lambda: proc.send_signal(signal.SIGABRT)), what, timeout_s):
        for line in stream:
            lines.append(line)
            if until(line):
                return lines
    raise AssertionError(f"{what}: the process ended first (exit {proc.wait(30)}); "
                         f"its last lines: {lines[-5:]}")


def handshake_pipe() -> tuple[int, dict[str, str]]:
    """A pipe for a helper process's handshake lines: (the read end, the environment
    entry naming the write end). Pass the write end (``int(env[HANDSHAKE_FD])``) in
    ``pass_fds`` and close it here once the process started (``close_write_end``)."""
    r, w = os.pipe()
    return r, {HANDSHAKE_FD: str(w)}


def close_write_end(env: dict[str, str]) -> None:
    os.close(int(env[HANDSHAKE_FD]))


def tell(line: str) -> None:
    """In a helper process: write ``line`` to the test's handshake pipe (if it gave one)."""
    fd = os.environ.get(HANDSHAKE_FD)
    if fd is not None:
        os.write(int(fd), (line + "\n").encode())


PARK_SLICE_S = 0.05
"""The longest single sleep of ``park``."""


def park(seconds: float) -> None:
    """Sleep ``seconds`` in slices of ``PARK_SLICE_S``: a signal the test sends once it read
    a handshake then always reaches its Python handler (a KeyboardInterrupt within a
    slice). One long ``time.sleep`` would not: a signal that lands between the handshake's
    write and the sleep's start is only flagged, and the sleep that begins next waits it
    out (CPython runs Python handlers between bytecodes, not inside a sleep begun after)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, PARK_SLICE_S))


def read_handshakes(fd: int, count: int, what: str, timeout_s: float = WAIT_S) -> list[str]:
    """The first ``count`` lines written to the handshake pipe ``fd``; the pipe closing
    first (every writer ended) or ``timeout_s`` passing fails the test."""
    data = b""
    end = time.monotonic() + timeout_s
    while data.count(b"\n") < count:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{what}: not within {timeout_s:g} s; got {data!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"{what}: every writer ended first; got {data!r}")
            data += chunk
    return data.decode().splitlines()[:count]
