"""Runs ``python -m MODULE ARGS`` as ``conftest.interruptible`` does (Python's own Ctrl-C
handler), with every read of a MaxText log parked in the middle: after its first block,
each reading process (this one, and each forked child reading beside it) writes
``parked PID`` to the test's handshake pipe (``tests.handshake``) and sleeps until a signal
ends the read. A test's Ctrl-C then surely lands while every read goes on, however fast or
loaded the machine; no signal within PARK_S and the read goes on to its end (the test, which
expected the signal's exit, fails).

    python -m tests.integration.parked_reads MODULE ARGS...
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from typing import Any

from pipecheck.logs.maxtext import halves
from tests.handshake import park, tell

PARK_S = 300.0
"""How long a parked read waits for the test's signal: far past any test's wait."""

_read_binary = halves.read_binary


class _Parked:
    """A log's byte stream that parks on its second read (a block was read and taken)."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.reads = stream, 0

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads == 2:
            tell(f"parked {os.getpid()}")
            park(PARK_S)
        return self.stream.read(size)

    def readline(self, size: int = -1) -> bytes:
        return self.stream.readline(size)


def parked_read_binary(r: Any, stream: Any, n: int, progress: Any = None) -> int:
    return _read_binary(r, _Parked(stream), n, progress)


def main() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    halves.read_binary = parked_read_binary  # every read of a log: one pass, either half
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
