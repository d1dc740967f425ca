"""Train steps written two ways, run by one timed loop.

- functional (JAX, optax): ``train_step(state, batch) -> (state, {"loss": x, ...})``;
  pipecheck jits it if it is not jitted yet (``jax.jit``).
- in place (Flax NNX): ``init`` returns NNX objects (one, or a tuple such as
  ``(model, optimizer, metrics)``) and ``train_step(*objects, batch)`` updates them in place
  under ``nnx.jit`` and returns the loss (a scalar, or a dict with ``"loss"``). pipecheck
  jits it with ``nnx.jit`` if it is not jitted yet.

The style is detected from the state ``init`` returns (NNX objects or not), so the user's
functions run without edits. The timed loop always sees ``(state, batch) -> (state,
metrics)``: for an in-place step the adapter passes the objects and returns them unchanged
with ``{"loss": loss}``; that is a few ``isinstance`` checks per dispatch and no device sync
(about 1 us per call with the error guard; ``benchmarks/user_step_overhead.py``).
Flax stays optional: it is only looked at when the user's code has imported it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable, Mapping, cast

from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch, BatchSpec, PyTree

if TYPE_CHECKING:  # pragma: no cover
    import jax
    from jax.sharding import Sharding

FUNCTIONAL = "functional"
IN_PLACE = "nnx"


def _nnx_base() -> type | None:
    """Flax NNX's base class of objects (``nnx.Pytree`` in flax 0.12, ``nnx.Object`` before),
    or None when the user's code has not imported flax.nnx."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is None:
        return None
    base = getattr(nnx, "Pytree", None) or getattr(nnx, "Object", None)
    return base if isinstance(base, type) else None


def style_of(state: PyTree) -> str:
    """``nnx`` when the state is NNX objects (one, or a tuple/list of them), else functional."""
    base = _nnx_base()
    if base is None:
        return FUNCTIONAL
    items = state if isinstance(state, (tuple, list)) else (state,)
    return IN_PLACE if any(isinstance(x, base) for x in items) else FUNCTIONAL


def place_state(state: PyTree, sharding: Sharding) -> PyTree:
    """The state on the devices with ``sharding``; NNX objects are updated in place, so
    objects shared between them (the optimizer's model) stay shared."""
    # lazy: Flax, JAX imported where used, so `import pipecheck` stays light
    import jax

    if style_of(state) == IN_PLACE:
        from flax import nnx

        nnx.update(state, jax.device_put(nnx.state(state), sharding))
        return state
    return jax.device_put(state, sharding)


class UserStep:
    """The user's train step as the timed loop calls it: ``(state, batch) -> (state,
    metrics)``, jitted, in either style. ``use_style`` picks the style from a state
    (:func:`style_of`); until then it is functional."""

    def __init__(self, step: Callable[..., PyTree]) -> None:
        self._step = step
        self._jitted: dict[str, jax.stages.Wrapped] = {}
        self.style = FUNCTIONAL

    def use_style(self, state: PyTree) -> None:
        self.style = style_of(state)

    def _fn(self) -> jax.stages.Wrapped:
        """The jitted step for the style (called, and lowered, as ``jax.stages.Wrapped``:
        ``nnx.jit``'s wrapper behaves as one but is typed apart)."""
        fn = self._jitted.get(self.style)
        if fn is None:
            if hasattr(self._step, "lower"):  # jax.jit or nnx.jit already
                jitted: object = self._step
            elif self.style == IN_PLACE:
                # lazy: Flax is looked at only when the user's state is NNX objects
                from flax import nnx

                jitted = nnx.jit(self._step)
            else:
                import jax

                jitted = jax.jit(self._step)
            fn = self._jitted[self.style] = cast("jax.stages.Wrapped", jitted)
        return fn

    def _args(self, state: PyTree, batch: Batch | BatchSpec) -> tuple[PyTree, ...]:
        if self.style == IN_PLACE and isinstance(state, (tuple, list)):
            return (*state, batch)
        return (state, batch)

    def __call__(self, state: PyTree, batch: Batch, /) -> tuple[PyTree, PyTree]:
        out = self._fn()(*self._args(state, batch))
        if self.style == FUNCTIONAL:
            return out  # type: ignore[no-any-return]
        if isinstance(out, Mapping) and "loss" in out:
            return state, out
        if out is None or getattr(out, "shape", None) != ():
            raise ConfigError(
                f"train_step updates NNX objects in place and returned "
                f"{'None' if out is None else type(out).__name__}; it must return its loss "
                "(a scalar, or a dict with 'loss'): end it with `return loss`")
        return state, {"loss": out}

    def lower(self, state: PyTree, batch: Batch | BatchSpec, /) -> jax.stages.Lowered:
        """``jit(...).lower`` with the arguments the step takes (compile analysis)."""
        return self._fn().lower(*self._args(state, batch))
