"""Devices and the data-parallel Mesh a workload runs on.

In a multi-process run (one process per host, ``jax.distributed``) the Mesh spans every
process's devices, each process loads its own share of the global batch (``host-local``
batches), and ``put_global`` assembles them into global arrays: the train step then ends
in a real cross-process all-reduce.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch

if TYPE_CHECKING:  # pragma: no cover
    import grain
    import jax
    from jax.sharding import Mesh, NamedSharding, Sharding

DATA_AXIS = "data"


def ensure_device_count(n: int) -> None:
    """Make JAX expose ``n`` devices; on CPU emulate them before the backend starts."""
    import jax  # lazy: keeps `import pipecheck` free of JAX
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_num_cpu_devices", n)
    available = len(jax.local_devices())
    if available < n:
        raise ConfigError(
            f"devices={n} but JAX has only {available} device(s) in this process; "
            "CPU devices can only be emulated before JAX starts (run pipecheck in a fresh "
            "process, or set XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        )


def check_splits(size: int, parts: int, what: str, where: str) -> None:
    """A batch's leading dimension must split evenly over the data-parallel devices (of
    every process)."""
    if size % parts:
        raise ConfigError(f"{what} does not split over {where}; use a multiple of {parts}")


def data_mesh(n: int) -> Mesh:
    """A 1-D Mesh, axis ``data``, over the first ``n`` devices of every process."""
    import jax  # lazy: keeps `import pipecheck` free of JAX
    from jax.sharding import Mesh

    ensure_device_count(n)
    if jax.process_count() == 1:
        return Mesh(np.array(jax.devices()[:n]), (DATA_AXIS,))
    devices = [d for p in range(jax.process_count())
               for d in sorted((d for d in jax.devices() if d.process_index == p),
                               key=lambda d: d.id)[:n]]
    return Mesh(np.array(devices), (DATA_AXIS,))


def process_count() -> int:
    import jax

    return int(jax.process_count())


def host_batch_size(batch_size: int, devices: int) -> int:
    """Examples this process loads per step: its share of the global ``batch_size``."""
    processes = process_count()
    where = (f"devices={devices}" if processes == 1
             else f"{processes} processes x devices={devices}")
    check_splits(batch_size, devices * processes, f"batch_size={batch_size}", where)
    return batch_size // processes


def shard_by_process(ds: grain.MapDataset) -> grain.MapDataset:
    """This process's share of a Grain MapDataset: every ``process_count``-th record (as
    ``grain.sharding.ShardByJaxProcess`` would); unchanged in one process, so a one-process
    pipeline gains no extra stage."""
    import jax

    if jax.process_count() == 1:
        return ds
    return ds[jax.process_index()::jax.process_count()]


def put_global(sharding: Sharding) -> Callable[[Batch], dict[str, jax.Array]]:
    """``put(host_batch)`` for a loop: ``device_put`` in one process; across processes,
    this process's host-local batch becomes its part of a global array."""
    import jax

    if jax.process_count() == 1:
        def put(batch: Batch) -> dict[str, jax.Array]:
            return {k: jax.device_put(v, sharding) for k, v in batch.items()}
    else:
        def put(batch: Batch) -> dict[str, jax.Array]:
            return {k: jax.make_array_from_process_local_data(sharding, v)
                    for k, v in batch.items()}
    return put


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Shard the leading (batch) dimension over the data axis."""
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec())
