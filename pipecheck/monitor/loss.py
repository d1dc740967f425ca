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
        f"Monitor.step could not find the loss in the step's output ({output_shape(out)}): "
        "the step must return a scalar loss, (state, {'loss': loss}), {'loss': loss} or "
        "(state, loss), the loss a scalar (shape ()); for any other output pass "
        "Monitor(loss=lambda out: ...) returning a scalar of it, e.g. for a step that "
        "returns only the new params: Monitor(loss=lambda params: jnp.sum(params['w']))"
    )


def output_shape(out: PyTree) -> str:
    """What a step's output is, in a few words: ``dict with keys 'w', 'b'``, ``tuple of 3``,
    ``tuple of 2 whose second element has shape (64,), not ()``, ``ArrayImpl of shape (8,),
    not ()``."""
    name = type(out).__name__
    if isinstance(out, Mapping):
        keys = [repr(k) for k in list(out)[:4]]
        more = ", ..." if len(out) > 4 else ""
        return f"{name} with keys {', '.join(keys)}{more}" if keys else f"empty {name}"
    if isinstance(out, tuple):
        if len(out) == 2 and isinstance(out[1], Mapping):
            return f"tuple of 2 whose second element is a {output_shape(out[1])}, no 'loss'"
        second = getattr(out[1], "shape", None) if len(out) == 2 else None
        if second is not None:
            return f"tuple of 2 whose second element has shape {tuple(second)}, not ()"
        return f"tuple of {len(out)}"
    shape = getattr(out, "shape", None)
    return f"{name} of shape {tuple(shape)}, not ()" if shape is not None else name
