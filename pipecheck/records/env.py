"""The environment a result was measured in (versions, backend, devices, host)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from typing import Mapping, Sequence

ENV_KEYS_THAT_MATTER = ("jax", "jaxlib", "grain", "tfds", "backend", "device_kind", "device_count")


RAM_TOLERANCE = 0.10
"""Total RAM differing by more than 10% is another machine (the same machine reports a few
MB more or less from one kernel to the next)."""


def package_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def collect_env() -> dict[str, str | int | None]:
    """Versions, JAX backend and devices, host and Python. Initializes the JAX backend."""
    # lazy: JAX imported where used, so `import pipecheck` stays light
    import jax

    devices = jax.devices()
    return {
        "pipecheck": package_version("pipecheck"),
        "jax": package_version("jax"),
        "jaxlib": package_version("jaxlib"),
        "grain": package_version("grain"),
        "tfds": package_version("tensorflow-datasets"),
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind if devices else None,
        "device_count": len(devices),
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def differences(a: Mapping[str, object], b: Mapping[str, object], keys: Sequence[str]
                ) -> list[tuple[str, object, object]]:
    """``(key, value in a, value in b)`` for each of ``keys`` whose values differ between two
    environments (``ram_mb`` within ``RAM_TOLERANCE`` counts as the same machine)."""
    out = []
    for key in keys:
        x, y = a.get(key), b.get(key)
        if key == "ram_mb" and isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if y and abs(x - y) / y <= RAM_TOLERANCE:
                continue
        if x != y:
            out.append((key, x, y))
    return out


def env_differences(a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    """Human-readable differences between two environments, on the keys that move timings."""
    return [f"{key}: {x} vs {y}"
            for key, x, y in differences(a, b, ENV_KEYS_THAT_MATTER + ("host", "cpu_count"))]


def input_warnings(path: str, env: Mapping[str, object], config: Mapping[str, object] | None,
                   this_config: Mapping[str, object],
                   this_env: Mapping[str, object] | None = None) -> list[str]:
    """Warnings when an input file was measured with another config or in another
    environment than this run (``config`` None: the file records none, e.g. a Monitor run)."""
    out = []
    if config:
        diffs = sorted(k for k in set(this_config) | set(config)
                       if this_config.get(k) != config.get(k))
        if diffs:
            out.append(f"{path} was measured with a different config ({', '.join(diffs)})")
    env_diffs = env_differences(dict(env), dict(this_env if this_env is not None
                                                else collect_env()))
    if env_diffs:
        out.append(f"{path} was measured in another environment ({'; '.join(env_diffs)}): its "
                   "times may not compare with this run's")
    return out


def other_workload(run_config: Mapping[str, object], this_config: Mapping[str, object]
                   ) -> str | None:
    """How the workload of a Monitor run (``run_config``, what the user passed to
    ``Monitor(config=...)``) differs from the built-in workload ``this_config`` measures, in
    words; None when they can be one. A Monitor runs in the user's own loop: only a config
    naming the same built-in workload, or the user's entry points (a mapping, which pipecheck
    cannot match to the loop and trusts), stands for it."""
    theirs, ours = run_config.get("workload"), this_config.get("workload")
    if isinstance(ours, Mapping) or theirs == ours:
        return None
    if theirs is None:
        return (f"it timed your own training loop, and T and D would be measured on the "
                f"built-in {ours} workload")
    return f"it timed workload {theirs}, and T and D would be measured on the built-in {ours}"
