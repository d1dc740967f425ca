"""The types of what flows through a train step, named once.

A user's state and metrics are pytrees of whatever structure JAX accepts (dicts of arrays,
NNX objects, dataclasses): no narrower type exists, so ``PyTree`` is ``Any`` under a name
that says so. A batch maps entry names to arrays: numpy on the host, ``jax.Array`` on the
devices. An input pipeline is one of Grain's datasets or loaders (Grain ships no type
information, so mypy reads these as ``Any`` either way; the names say what is meant).

JAX and Grain are imported for type checking only: importing this module costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import grain
    import jax

    from pipecheck.measure.pipeline import MainProcessMap

PyTree = Any
"""A user's state or metrics: any pytree JAX accepts (no narrower type exists)."""

Batch = Mapping[str, Union[np.ndarray, "jax.Array"]]
"""One batch: entry name -> array (numpy on the host, ``jax.Array`` once on the devices)."""

BatchSpec = Mapping[str, "jax.ShapeDtypeStruct"]
"""A batch's global shapes, dtypes and shardings (what ``lower`` compiles for)."""

InputPipeline = Union["grain.MapDataset", "grain.IterDataset", "grain.DataLoader",
                      "MainProcessMap"]
"""What a workload's ``dataset`` builds: a Grain dataset or ``grain.DataLoader`` (which
pipecheck runs with the setting it measures), or a pipeline with a last transform in the
training process."""


class TrainStep(Protocol):
    """A jitted train step as the timed loop calls it: ``(state, batch) -> (state,
    metrics)``, and ``lower`` for compile analysis (``jax.jit``, ``nnx.jit``, UserStep)."""

    def __call__(self, state: PyTree, batch: Batch, /) -> tuple[PyTree, PyTree]: ...

    def lower(self, state: PyTree, batch: Batch | BatchSpec, /) -> jax.stages.Lowered: ...
