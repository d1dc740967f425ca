"""Progress bars for long work: drawn on stderr when it is a terminal, nothing when piped."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pipecheck.progress import Progress, Task

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm


class _BarTask(Task):
    def __init__(self, bar: tqdm[None]) -> None:
        self._bar = bar

    def advance(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        self._bar.close()


class TerminalProgress(Progress):
    """A tqdm bar per task on stderr; tqdm draws nothing when stderr is not a terminal."""

    def task(self, description: str, total: int, unit: str = "") -> Task:
        # lazy: tqdm (~0.1 s) only when a bar is drawn, so the commands start fast
        from tqdm import tqdm

        bar = tqdm(total=total or None, desc=f"pipecheck: {description}", unit=unit or "it",
                   unit_scale=unit == "B", file=sys.stderr, leave=False,
                   disable=None)  # None: only on a terminal
        return _BarTask(bar)
