"""Progress of long work, reported without printing: a line when a stage starts or ends
(``say``: "timing 30 batches", "T = 31.0 ms"), and a task counted as it goes
(``task(description, total, unit)``, then ``advance(n)``: parsing a large log,
bootstrapping).

The core takes a ``Progress``; the default does nothing. The CLI passes one that writes the
lines to stderr and draws a task as a bar on a terminal (``pipecheck.cli.progress``), or
nothing with ``--quiet``.
"""

from __future__ import annotations

from types import TracebackType


class Task:
    """One piece of long work. This base class ignores everything."""

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""

    def close(self) -> None:
        """The work is over (finished or abandoned)."""

    def __enter__(self) -> Task:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class Progress:
    """Where long work reports how far it got. This base class shows nothing."""

    def say(self, line: str) -> None:
        """One line of progress: a stage started or ended, and what it found."""

    def task(self, description: str, total: int, unit: str = "") -> Task:
        return Task()


NO_PROGRESS = Progress()
"""The do-nothing default of every function that takes ``progress``."""
