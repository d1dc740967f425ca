"""The types of what flows through a train step and the loop around it.

A user's state and metrics are pytrees of whatever structure JAX accepts (dicts of arrays,
NNX objects, dataclasses): no narrower type exists, so ``PyTree`` is ``Any`` under a name
that says so. A batch maps entry names to arrays: numpy on the host, ``jax.Array`` on the
devices. A step hook is host work the timed loop runs between steps (checkpoint, eval,
logging); it sees the loop's recorder as a ``HookRecorder``. What a workload's dataset
builds (``InputPipeline``) is named with the pipeline builder, ``data/grain_pipeline``.

JAX is imported for type checking only: importing this module costs nothing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import jax

PyTree = Any
"""A user's state or metrics: any pytree JAX accepts (no narrower type exists)."""

Batch = Mapping[str, Union[np.ndarray, "jax.Array"]]
"""One batch: entry name -> array (numpy on the host, ``jax.Array`` once on the devices)."""

BatchSpec = Mapping[str, "jax.ShapeDtypeStruct"]
"""A batch's global shapes, dtypes and shardings (what ``lower`` compiles for)."""

class TrainStep(Protocol):
    """A jitted train step as the timed loop calls it: ``(state, batch) -> (state,
    metrics)``, and ``lower`` for compile analysis (``jax.jit``, ``nnx.jit``, UserStep)."""

    def __call__(self, state: PyTree, batch: Batch, /) -> tuple[PyTree, PyTree]: ...

    def lower(self, state: PyTree, batch: Batch | BatchSpec, /) -> jax.stages.Lowered: ...


class HookRecorder(Protocol):
    """What a step hook does with the timed loop's recorder (``measure.spans.SpanRecorder``):
    time a span, tag the step, read the clock."""

    clock: Callable[[], float]

    def span(self, name: str, step_num: int | None = None) -> AbstractContextManager[None]: ...

    def tag(self, name: str) -> None: ...


class StepHook(Protocol):
    """Host work a loop runs for step ``step`` after the previous step's loss was observed
    (checkpoint, eval, logging). Its cost is charged to step ``step``."""

    def __call__(self, step: int, state: PyTree, metrics: PyTree,
                 recorder: HookRecorder) -> None: ...
