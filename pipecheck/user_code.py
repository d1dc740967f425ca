"""Errors raised by the user's own code, as one line naming where they were raised.

An exception from an entry point (``init``, ``batch``, ``dataset``), the train step, or the
dataset's transforms (in the main process or re-raised from a Grain worker, which keeps the
worker's frames) becomes a :class:`~pipecheck.errors.UserCodeError`:

    init (model.py:16) raised ValueError: hidden must be positive

The location is the innermost frame of the traceback that is the user's: not the standard
library, not an installed package (site-packages), not pipecheck itself. The whole stack is
kept as text for ``--traceback``.

A frame of code that cloudpickle sent to a Grain worker by value (the functions of a
``path/to/file.py`` entry point's module) may carry no file name: cloudpickle 3.1.3 and later
rename such code ``<dynamic-code>``. Those frames are mapped back to the file pipecheck
loaded (:func:`remember_user_file`) by the function's name and the line, which cloudpickle
keeps.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import traceback
import types
from typing import TYPE_CHECKING, Callable, ParamSpec, TypeVar

from pipecheck.errors import PipecheckError, PipelineError, UserCodeError, one_line
from pipecheck.step_types import Batch, BatchSpec, PyTree, TrainStep
from pipecheck.units import short_path

if TYPE_CHECKING:  # pragma: no cover
    import jax

P = ParamSpec("P")
R = TypeVar("R")

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_PATHS = sysconfig.get_paths()
_NOT_USER_DIRS = tuple(sorted({os.path.abspath(_PATHS[k]) + os.sep
                               for k in ("stdlib", "platstdlib", "purelib", "platlib")}))
INSTALLED_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
"""Path fragments of installed packages (libraries, not the user's code)."""


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """Is this source file the user's (not stdlib, an installed package, or pipecheck)?"""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    if path.startswith(_PKG_DIR + os.sep) or path.startswith(_NOT_USER_DIRS):
        return False
    return not any(m in path for m in INSTALLED_MARKERS)


_USER_FILES: list[str] = []
"""The files pipecheck imported for the user's entry points, in the order loaded."""


def remember_user_file(path: str) -> None:
    """Note a user's file whose code may reach Grain workers by value (see the module doc)."""
    path = os.path.abspath(path)
    if path not in _USER_FILES:
        _USER_FILES.append(path)


@functools.lru_cache(maxsize=64)
def _functions_of(path: str) -> tuple[tuple[str, int, int], ...]:
    """(name, first line, last line) of every function and class body defined in ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            code = compile(f.read(), path, "exec")
    except (OSError, SyntaxError, ValueError):
        return ()
    found: list[tuple[str, int, int]] = []
    pending = [code]
    while pending:
        co = pending.pop()
        lines = [line for _, _, line in co.co_lines() if line is not None]
        if co is not code and lines:
            found.append((co.co_name, co.co_firstlineno, max(lines)))
        pending.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return tuple(found)


def file_of_nameless_frame(name: str, lineno: int | None) -> str | None:
    """The one remembered user file that defines a function ``name`` spanning ``lineno``
    (None when no file, or more than one, does: a guess would name the wrong line)."""
    if lineno is None:
        return None
    matches = [path for path in _USER_FILES
               if any(fn == name and first <= lineno <= last
                      for fn, first, last in _functions_of(path))]
    return matches[0] if len(matches) == 1 else None


def _located(frame: traceback.FrameSummary) -> traceback.FrameSummary | None:
    """``frame`` when it is the user's; a nameless frame mapped back to the user's file."""
    if is_user_file(frame.filename):
        return frame
    if frame.filename.startswith("<") and _USER_FILES:
        path = file_of_nameless_frame(frame.name, frame.lineno)
        if path is not None:
            return traceback.FrameSummary(path, frame.lineno, frame.name, lookup_line=False)
    return None


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback that is in the user's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        located = _located(frame)
        if located is not None:
            return located
    return None


def user_code_error(role: str, exc: BaseException, context: str = "") -> UserCodeError:
    """``ROLE (file.py:LINE) raised TYPE: MESSAGE``, with the stack kept for --traceback."""

    frame = user_frame(exc)
    where = f" ({short_path(frame.filename)}:{frame.lineno})" if frame is not None else ""
    tail = f" ({context})" if context else ""
    err = UserCodeError(
        f"{role}{where} raised {type(exc).__name__}: {one_line(exc)}{tail}")
    err.details = "".join(traceback.format_exception(exc))
    return err


def pipeline_error(exc: BaseException, label: str) -> PipecheckError:
    """A pipeline's exception: the user's dataset when a user frame raised it, else one
    PipelineError naming the setting (``label``: ``workers=2, threads=1``)."""
    if isinstance(exc, PipecheckError):
        err: PipecheckError = type(exc)(
            f"the input pipeline ({label}) failed: {one_line(exc)}")
        err.details = exc.details
        return err
    if user_frame(exc) is not None:
        return user_code_error("dataset", exc, f"in the input pipeline, {label}")
    err = PipelineError(f"the input pipeline ({label}) raised {type(exc).__name__}: "
                        f"{one_line(exc)}")
    err.details = "".join(traceback.format_exception(exc))
    return err


def guarded(role: str, fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` whose exceptions become a UserCodeError naming ``role`` (entry points that
    run outside any timed loop: init, batch, dataset)."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except PipecheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code may raise anything
            raise user_code_error(role, e) from None

    return call


class GuardedStep:
    """The user's (jitted) train step, whose exceptions become a UserCodeError.

    Calling it adds one Python frame and a ``try`` to each dispatch and no device sync
    (with the NNX adapter, about 1 us per call: benchmarks/user_step_overhead.py); other
    attributes (``lower``, ...) are the step's own.
    """

    def __init__(self, step: TrainStep, role: str = "train_step") -> None:
        self._step = step
        self._role = role

    def __call__(self, state: PyTree, batch: Batch, /) -> tuple[PyTree, PyTree]:
        try:
            return self._step(state, batch)
        except PipecheckError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code may raise anything
            raise user_code_error(self._role, e) from None

    def lower(self, state: PyTree, batch: Batch | BatchSpec, /) -> jax.stages.Lowered:
        return self._step.lower(state, batch)

    def __getattr__(self, name: str) -> object:
        return getattr(self._step, name)
