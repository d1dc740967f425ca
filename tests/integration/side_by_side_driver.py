"""Runs ``load_runs`` and ``pipecheck diff`` in a fresh process for test_diff_side_by_side:
the pytest process has JAX imported (some test modules import it at collection), where
``load_runs`` rightly refuses to fork.

    python -m tests.integration.side_by_side_driver same MIN_BYTES A1 B1 [A2 B2 ...]
    python -m tests.integration.side_by_side_driver cli FAULT A B

``same``: for each pair, the runs read side by side (``min_bytes=MIN_BYTES``) and one after
the other; prints one JSON line per pair: forks made, summaries, diff records, reports
equal. ``cli``: ``main(["diff", A, B])`` with B read side by side, after planting FAULT in
the child's ``load_run`` (``none`` plants nothing; ``slow`` slows both reads, for a signal
to land in, each process first writing ``slow PID`` to the test's handshake pipe), and,
for ``none``, then one after the other; prints one JSON line with the exit codes, stdout,
stderr, any exception that left ``main``, the forks made and the child processes left.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import traceback
from typing import Any

import psutil

from pipecheck.analysis.diff import diff_runs
from pipecheck.cli import main as cli_main
from pipecheck.errors import ResultFormatError
from pipecheck.logs import side_by_side
from pipecheck.logs.runs import load_run
from pipecheck.report.diff import format_diff
from tests.handshake import park, tell

NEVER = 1 << 62
"""A ``SIDE_BY_SIDE_MIN_BYTES`` no file reaches: one after the other."""

PARENT = os.getpid()
FORKS: list[int] = []
_start = side_by_side.ChildRead.start.__func__  # type: ignore[attr-defined]


def _counted_start(cls: Any, path: Any) -> Any:
    child = _start(cls, path)
    FORKS.append(child.pid)
    return child


side_by_side.ChildRead.start = classmethod(_counted_start)  # type: ignore[method-assign]


class Unpicklable(Exception):
    """An error that cannot travel: it holds a lambda."""

    def __init__(self) -> None:
        super().__init__("cannot travel")
        self.callback = lambda: None


class TwoPartError(ResultFormatError):
    """A PipecheckError that pickles but cannot be rebuilt (two arguments, one in args)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")


def _fault(name: str) -> None:
    if name == "value-error":
        raise ValueError("boom in B")
    if name == "unpicklable":
        raise Unpicklable()
    if name == "unpicklable-pipecheck":
        raise TwoPartError("b.log", "cannot be rebuilt")
    if name == "killed":
        os.kill(os.getpid(), signal.SIGKILL)


SLOW_S = 30.0
"""How long the ``slow`` fault makes each read: far longer than any test waits."""


def plant(fault: str) -> None:
    """``load_run`` raises ``fault`` in the child only (this process reads as usual);
    ``slow`` makes both processes' reads take ``SLOW_S`` longer."""
    def faulty(path: Any, progress: Any = side_by_side.NO_PROGRESS) -> Any:
        if fault == "slow":
            tell(f"slow {os.getpid()}")  # the test's handshake: this read is under way
            park(SLOW_S)
        elif os.getpid() != PARENT:
            _fault(fault)
        return load_run(path, progress)

    side_by_side.load_run = faulty  # type: ignore[assignment]


def same(min_bytes: int, paths: list[str]) -> None:
    for a, b in zip(paths[::2], paths[1::2], strict=True):
        FORKS.clear()
        side = side_by_side.load_runs(a, b, min_bytes=min_bytes)
        forks = len(FORKS)
        seq = side_by_side.load_runs(a, b, min_bytes=NEVER)
        d_side, d_seq = diff_runs(*side), diff_runs(*seq)
        print(json.dumps({
            "pair": [a, b], "forks": forks, "forks_sequential": len(FORKS) - forks,
            "summaries": [x.to_dict() == y.to_dict() for x, y in zip(side, seq, strict=True)],
            "diff": json.dumps(d_side.to_dict()) == json.dumps(d_seq.to_dict()),
            "report": format_diff(d_side) == format_diff(d_seq),
            "jax": "jax" in sys.modules,
        }), flush=True)


def run_main(argv: list[str]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    raised = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except BaseException as e:  # noqa: BLE001 -- the test looks at what left main
            code = None
            raised = {"type": type(e).__name__, "message": str(e),
                      "notes": getattr(e, "__notes__", []),
                      "stack": "".join(traceback.format_exception(e))}
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
            "raised": raised}


def cli(fault: str, a: str, b: str) -> None:
    side_by_side.SIDE_BY_SIDE_MIN_BYTES = 0
    plant(fault)
    # Side by side first: a run of diff leaves tqdm's monitor thread, which forbids a fork.
    side = run_main(["diff", a, b])
    left = [p.pid for p in psutil.Process().children(recursive=True)]
    alive = [pid for pid in FORKS if psutil.pid_exists(pid)]
    sequential = None
    if fault == "none":
        side_by_side.SIDE_BY_SIDE_MIN_BYTES = NEVER
        sequential = run_main(["diff", a, b])
    print(json.dumps({"side": side, "sequential": sequential, "forks": len(FORKS),
                      "children_left": left, "forked_alive": alive}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "same":
        same(int(sys.argv[2]), sys.argv[3:])
    else:
        cli(*sys.argv[2:5])
