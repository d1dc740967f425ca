"""Two runs read side by side: run B in a forked child process while this process reads run
A; B's ``RunSummary`` comes back pickled through a pipe.

``load_runs`` is what ``pipecheck diff`` reads two files with (``load_sides``: files or
folders of runs). Where a second process
cannot help or is not safe (``why_one_after_the_other``: one core, no ``os.fork``, JAX or a
second thread already running, small inputs, a result JSON) it reads them one after the
other with ``load_run``. Either way the summaries are the same,
and so is any error: A's first, then B's, of its own type with its own message.

The child (``forked.Child``: quiet, always reaped, ended by a Ctrl-C or its parent's
death) shows no progress; this process shows B's read as a bar of its own, filled when B
arrives.
"""

from __future__ import annotations

import os

from pipecheck.errors import PipecheckError
from pipecheck.logs.forked import Child, sigint_held, why_not_fork
from pipecheck.logs.runs import is_result_file, load_run, load_side
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.codec import SERIAL, ArrayEncoder
from pipecheck.records.diff import RunSummary

SIDE_BY_SIDE_MIN_BYTES = 4 << 20
"""Both inputs must be MaxText logs of at least this size (4 MiB, ~20,000 steps) to read B
in a second process. ``benchmarks/side_by_side.py`` on the shared 2-core machine: the
fork, hand-back and reaping cost 7-15 ms; side by side took 1.3-1.6x the time of one
after the other up to 1 MiB logs, 0.7-1.1x at 2 MiB, 0.73-0.75x at 4 MiB, 0.65-0.69x
from 6 MiB on: from 4 MiB it won every time. A pipecheck result (JSON) never goes to the
child: it reads in about the time its summary takes to come back (a 1M-step record, 17
MB, 0.35 s against 0.3 s for the hand-back; 0.98 s side by side against 0.70 s)."""


def why_one_after_the_other(a: str | os.PathLike[str], b: str | os.PathLike[str],
                            min_bytes: int = SIDE_BY_SIDE_MIN_BYTES) -> str | None:
    """Why A and B are to be read one after the other, or None to read them side by side."""
    why = why_not_fork()
    if why is not None:
        return why
    try:
        smaller = min(os.path.getsize(a), os.path.getsize(b))
        if smaller < min_bytes:
            return f"an input is under {min_bytes:,} bytes"
        if is_result_file(a) or is_result_file(b):
            return "an input is a pipecheck result (JSON): quicker read here than handed back"
    except (OSError, PipecheckError):
        return "an input cannot be read (load_run says why)"
    return None


def load_runs(a: str | os.PathLike[str], b: str | os.PathLike[str],
              progress: Progress = NO_PROGRESS, min_bytes: int | None = None,
              encoder: ArrayEncoder = SERIAL) -> tuple[RunSummary, RunSummary]:
    """``(load_run(a), load_run(b))``, B read in a second process when it helps and is safe
    (``min_bytes``: ``SIDE_BY_SIDE_MIN_BYTES`` unless given). ``encoder``: the one a record
    of both will be written with, given A's step columns as soon as A is read (a
    ``pipecheck.encoding.ParallelEncoder`` compresses them on another thread while B is
    read or awaited)."""
    limit = SIDE_BY_SIDE_MIN_BYTES if min_bytes is None else min_bytes
    if why_one_after_the_other(a, b, limit) is not None:
        return _load_a(a, progress, encoder), load_run(b, progress)
    child: ChildRead | None = None
    try:
        with sigint_held():  # a Ctrl-C lands once ``child`` is set, so it is reaped
            child = ChildRead.start(b)
        size = os.path.getsize(b)
        # A bar (drawn on a terminal only), so a piped stderr holds what it always did.
        with progress.task(f"reading {os.path.basename(str(b))} alongside, in a second "
                           "process", size, "B") as task:
            run_a = _load_a(a, progress, encoder)
            run_b: RunSummary = child.result()
            task.advance(size)
    finally:
        if child is not None:
            child.reap()
    return run_a, run_b


def load_sides(a: str | os.PathLike[str], b: str | os.PathLike[str],
               progress: Progress = NO_PROGRESS, encoder: ArrayEncoder = SERIAL
               ) -> tuple[tuple[RunSummary, ...], tuple[RunSummary, ...]]:
    """The runs of each side of a diff: two files as ``load_runs`` reads them (side by side
    when it helps); where A or B is a folder of runs, every run of each side
    (``runs.load_side``), A's before B's."""
    if os.path.isdir(a) or os.path.isdir(b):
        return load_side(a, progress), load_side(b, progress)
    run_a, run_b = load_runs(a, b, progress, encoder=encoder)
    return (run_a,), (run_b,)


def _load_a(a: str | os.PathLike[str], progress: Progress, encoder: ArrayEncoder
            ) -> RunSummary:
    """``load_run(a)``, its step columns then handed to ``encoder`` to compress ahead."""
    run = load_run(a, progress)
    encoder.compress_ahead(run.per_step_arrays())
    return run


class ChildRead(Child):
    """``load_run(path)`` in a forked child (``forked.Child``)."""

    @classmethod
    def start(cls, path: str | os.PathLike[str]) -> ChildRead:
        child = cls.run(str(path), load_run, str(path))
        assert isinstance(child, ChildRead)
        return child
