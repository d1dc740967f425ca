"""Progress of long work (parsing a large log, bootstrapping), reported without printing.

The core takes a ``Progress`` and calls ``task(description, total, unit)``, then
``advance(n)`` on the task as work gets done. The default does nothing; the CLI passes
one that draws a bar on a terminal (``pipecheck.cli.progress``), and nothing when piped.
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

    def task(self, description: str, total: int, unit: str = "") -> Task:
        return Task()


NO_PROGRESS = Progress()
"""The do-nothing default of every function that takes ``progress``."""
