"""Devices and the data-parallel Mesh a workload runs on."""

from __future__ import annotations

from typing import Any

import numpy as np

from pipecheck.errors import ConfigError

DATA_AXIS = "data"


def ensure_device_count(n: int) -> None:
    """Make JAX expose ``n`` devices; on CPU emulate them before the backend starts."""
    import jax
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_num_cpu_devices", n)
    available = len(jax.devices())
    if available < n:
        raise ConfigError(
            f"devices={n} but JAX has only {available} device(s) in this process; "
            "CPU devices can only be emulated before JAX starts (run pipecheck in a fresh "
            "process, or set XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        )


def data_mesh(n: int) -> Any:
    """A 1-D Mesh over the first ``n`` devices, axis ``data``."""
    import jax
    from jax.sharding import Mesh

    ensure_device_count(n)
    return Mesh(np.array(jax.devices()[:n]), (DATA_AXIS,))


def batch_sharding(mesh: Any) -> Any:
    """Shard the leading (batch) dimension over the data axis."""
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def replicated(mesh: Any) -> Any:
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec())
