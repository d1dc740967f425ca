"""What a workload is: state, a jitted train step, the batch spec, and a data pipeline."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from pipecheck.config import RunConfig
from pipecheck.data.grain_pipeline import InputPipeline
from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch, BatchSpec, PyTree, StepHook, TrainStep

if TYPE_CHECKING:  # pragma: no cover
    import jax
    from jax.sharding import Mesh, Sharding


@dataclasses.dataclass
class Workload:
    """A training workload, built for one config on one Mesh.

    ``train_step`` is jitted, ``(state, batch) -> (state, metrics)`` with a
    scalar ``metrics["loss"]``. ``batch_spec`` gives the global shape, dtype and
    sharding of every batch entry (ShapeDtypeStructs). ``host_batch`` returns
    one batch as numpy arrays; ``dataset`` builds the Grain pipeline that yields
    such batches (``workers``, ``threads`` as given).
    """

    name: str
    config: RunConfig
    mesh: Mesh
    train_step: TrainStep
    train_step_name: str
    init_state: Callable[[], PyTree]
    batch_spec: BatchSpec
    host_batch: Callable[[], Mapping[str, np.ndarray]]
    dataset: Callable[[], InputPipeline] | None = None
    hooks: Sequence[StepHook] = ()
    prepare: Callable[[Workload, PyTree], None] | None = None
    """Runs before the timed loop (e.g. AOT lowering); its compilations are counted."""
    flops_per_step: float | None = None
    """Known FLOPs of one step, when the compiler's cost analysis cannot see them."""
    tokens_key: str | None = None
    """Batch entry whose elements are tokens (for tokens/s)."""

    @property
    def batch_size(self) -> int:
        first = next(iter(self.batch_spec.values()))
        return int(first.shape[0])

    @property
    def tokens_per_batch(self) -> int | None:
        if self.tokens_key is None:
            return None
        spec = self.batch_spec[self.tokens_key]
        n = 1
        for d in spec.shape:
            n *= int(d)
        return n

    def put(self, host_batch: Batch) -> dict[str, jax.Array]:
        """Move a host batch to the devices with the spec's sharding (as training does);
        across processes, the host-local batch becomes this process's part of the global
        array."""
        # lazy: JAX imported where used, so `import pipecheck` stays light
        import jax

        if jax.process_count() == 1:
            return {k: jax.device_put(v, self.batch_spec[k].sharding)
                    for k, v in host_batch.items()}
        return {k: jax.make_array_from_process_local_data(
                    self.batch_spec[k].sharding, v, self.batch_spec[k].shape)
                for k, v in host_batch.items()}


TOKEN_ENTRY_NAMES = ("tokens", "inputs", "input_ids")
"""Batch entries that hold token ids by name: pipecheck's demo, MaxText and most language-model
pipelines (``inputs``/``targets``), Hugging Face tokenizers."""


def tokens_key_of(batch: Mapping[str, object], named: str | None = None) -> str | None:
    """The batch entry whose elements are tokens (for tokens/s): ``named`` (the config's
    ``tokens_key``) when given; else ``tokens``; else the first of ``TOKEN_ENTRY_NAMES``, then
    of the batch's entries, that is an integer ``[batch, seq]`` array; None when none is.
    Entries are arrays or ShapeDtypeStructs (``dtype`` and ``shape``)."""
    if named is not None:
        if named not in batch:
            raise ConfigError(f"tokens_key {named!r} is not a batch entry; the batch has "
                              f"{', '.join(map(repr, batch))}")
        return named
    if "tokens" in batch:
        return "tokens"

    def token_ids(value: object) -> bool:
        shape = tuple(getattr(value, "shape", ()))
        return (len(shape) == 2 and shape[1] > 1
                and np.issubdtype(np.dtype(getattr(value, "dtype", float)), np.integer))

    for name in (*TOKEN_ENTRY_NAMES, *batch):
        if name in batch and token_ids(batch[name]):
            return name
    return None


def spec_of(host_batch: Mapping[str, np.ndarray],
            sharding: Sharding) -> dict[str, jax.ShapeDtypeStruct]:
    """ShapeDtypeStructs (with sharding) describing the global batch of which ``host_batch``
    is this process's part (the whole of it in one process)."""
    import jax  # lazy: keeps `import pipecheck` free of JAX

    n = jax.process_count()
    return {
        k: jax.ShapeDtypeStruct((v.shape[0] * n, *v.shape[1:]), v.dtype, sharding=sharding)
        for k, v in host_batch.items()
    }
