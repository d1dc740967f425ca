"""Errors raised by the user's own code, as one line naming where they were raised.

An exception from an entry point (``init``, ``batch``, ``dataset``), the train step, or the
dataset's transforms (in the main process or re-raised from a Grain worker, which keeps the
worker's frames) becomes a :class:`~pipecheck.errors.UserCodeError`:

    init (model.py:16) raised ValueError: hidden must be positive

The location is the innermost frame of the traceback that is the user's: not the standard
library, not an installed package (site-packages), not pipecheck itself. The whole stack is
kept as text for ``--traceback``.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import traceback
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


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback that is in the user's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if is_user_file(frame.filename):
            return frame
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
