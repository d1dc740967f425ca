"""Progress on stderr for every long command: each line prefixed ``pipecheck:``, each task a
bar (drawn only when stderr is a terminal); nothing at all with ``--quiet``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from pipecheck.progress import NO_PROGRESS, Progress, Task

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
    """Lines on stderr; a tqdm bar per task, which tqdm draws only on a terminal."""

    def say(self, line: str) -> None:
        click.echo(f"pipecheck: {line}", err=True)

    def task(self, description: str, total: int, unit: str = "") -> Task:
        if not sys.stderr.isatty():  # tqdm's own rule for disable=None: no bar to draw
            return Task()
        # lazy: tqdm (~0.03-0.1 s) only when a bar is drawn, so the commands start fast
        from tqdm import tqdm

        bar = tqdm(total=total or None, desc=f"pipecheck: {description}", unit=unit or "it",
                   unit_scale=unit == "B", file=sys.stderr, leave=False,
                   disable=None)  # None: only on a terminal
        return _BarTask(bar)


def command_progress(quiet: bool) -> Progress:
    """A command's progress: on stderr, or none with ``--quiet``."""
    return NO_PROGRESS if quiet else TerminalProgress()
