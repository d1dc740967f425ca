"""The step function as the Monitor sees it: where the loss is in its output, and the name
JAX's compile events give it."""

from __future__ import annotations

from typing import Callable, Mapping

from pipecheck.errors import MonitorError
from pipecheck.step_types import PyTree


def function_name(fn: Callable[..., object]) -> str | None:
    """The name JAX's compile events give ``fn`` (``jit(NAME)``), or None."""
    return getattr(fn, "__name__", None) or getattr(
        getattr(fn, "__wrapped__", None), "__name__", None)


def default_loss(out: PyTree) -> PyTree:
    """The loss in a step's output: ``(state, {"loss": x, ...})``, ``{"loss": x}``,
    ``(state, x)`` with a scalar ``x``, or a scalar."""
    if isinstance(out, tuple) and len(out) == 2:
        metrics = out[1]
        if type(metrics) is dict and "loss" in metrics:  # the common case, without the ABC
            return metrics["loss"]
        if isinstance(metrics, Mapping) and "loss" in metrics:
            return metrics["loss"]
        if getattr(metrics, "shape", None) == ():
            return metrics
    if isinstance(out, Mapping) and "loss" in out:
        return out["loss"]
    if getattr(out, "shape", None) == ():
        return out
    if out is None:
        raise MonitorError(
            "Monitor.step: the step returned None; a step that updates its state in place "
            "(a Flax NNX train_step) must return its loss: end it with `return loss`")
    raise MonitorError(
        f"Monitor.step could not find the loss in the step's output ({type(out).__name__}); "
        "return (state, {'loss': ...}) or pass Monitor(loss=lambda out: ...)"
    )
