"""Faults of pipecheck's own code that runs inside a user's training loop: caught, reported
once as a warning naming what was lost, and never raised into the loop.

What pipecheck runs while a user's loop goes (the recorder's fold on the loop's thread, the
writer's and the event file's threads, the garbage-collection and compilation callbacks, the
sync locator's thread, the profiler window) reports its own exceptions here instead of
raising them: a monitoring tool must not end a day-long run. The user's own exceptions (the
step function, the loader, the loss read) never pass through here: they reach the loop
unchanged. The messages go into the record's ``warnings``.
"""

from __future__ import annotations

import functools
import threading
import traceback
import warnings
from typing import Callable, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

MESSAGE_CHARS = 300
"""The longest message kept of an exception: one line, as a warning shows it."""


def describe(exc: BaseException) -> str:
    """An exception as one line: ``IndexError: index 3 is out of bounds``."""
    lines = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:MESSAGE_CHARS]


class Faults:
    """The faults one Monitor's (or one measurement's) own code met: each place's first one
    warned about (``RuntimeWarning``) and kept as a line of the record's warnings; later ones
    at the same place counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def report(self, where: str, exc: BaseException, lost: str) -> None:
        """Note a fault of pipecheck's ``where`` (``exc``), ``lost`` saying what it cost the
        record; warn the first time at that place. Never raises."""
        try:
            with self._lock:
                self._counts[where] = self._counts.get(where, 0) + 1
                if where in self._first:
                    return
                message = (f"pipecheck: internal error in {where} ({describe(exc)}); {lost}; "
                           "the training loop goes on (please report this message)")
                self._first[where] = message
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        except Exception:  # noqa: BLE001,S110 - reporting must not raise either
            pass

    def guarded(self, where: str, lost: str, fn: Callable[P, R],
                default: R | None = None) -> Callable[P, R | None]:
        """``fn``, which reports its exceptions here (``where``, ``lost``) and returns
        ``default`` instead of raising (for callbacks and threads pipecheck hands out)."""

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R | None:
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - see the module docstring
                self.report(where, e, lost)
                return default

        return call

    @property
    def messages(self) -> tuple[str, ...]:
        """Each place's first fault, as warned, with how many followed there."""
        with self._lock:
            return tuple(
                m if self._counts[w] == 1 else f"{m} [{self._counts[w]} times]"
                for w, m in self._first.items())

    def __bool__(self) -> bool:
        return bool(self._first)
