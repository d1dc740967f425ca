"""A saved tuning: the chosen Grain settings as a YAML config, and where they were measured.

``--save-config FILE`` (``dataloader``, ``compare``) writes the run's config with the
chosen ``num_workers``, ``per_worker_buffer_size``, ``num_threads`` and
``prefetch_buffer_size``, plus a ``measured_on`` section (cores, RAM, host, versions, and
the loader time measured there). ``--config FILE`` reads it back as any config;
``grain_options(FILE)`` turns it into Grain's option objects in the user's own code. A run
on a machine that differs from ``measured_on`` warns: settings are tuned for a machine.

No JAX or Grain import at module level (``import pipecheck`` stays cheap).
"""

from __future__ import annotations

import os
import platform
import socket
import warnings
from typing import TYPE_CHECKING, Mapping

import psutil
import yaml

from pipecheck.config import GRAIN_KEYS, MEASURED_ON, RunConfig, read_config_file
from pipecheck.errors import ConfigError
from pipecheck.host_cpus import usable_cores
from pipecheck.records import store
from pipecheck.records.env import differences, package_version
from pipecheck.records.grain_settings import (
    DEFAULT_PER_WORKER_BUFFER,
    DEFAULT_THREADS,
    GrainSettings,
)

if TYPE_CHECKING:  # pragma: no cover
    import grain

MACHINE_KEYS = ("host", "cpu_count", "usable_cores", "ram_mb", "python", "jax", "jaxlib",
                "grain")


def this_machine() -> dict[str, str | int | None]:
    """Where a tuning is measured: host, cores, RAM and the versions that move timings."""
    return {
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "usable_cores": usable_cores(),
        "ram_mb": int(psutil.virtual_memory().total / 2**20),
        "python": platform.python_version(),
        "jax": package_version("jax"),
        "jaxlib": package_version("jaxlib"),
        "grain": package_version("grain"),
        "pipecheck": package_version("pipecheck"),
    }


def machine_differences(saved: Mapping[str, object],
                        current: Mapping[str, object]) -> list[str]:
    """How the machine a config was measured on differs from this one, in words."""
    keys = [key for key in MACHINE_KEYS if key in saved]
    return [f"{key} {x} there, {y} here" for key, x, y in differences(saved, current, keys)]


def machine_warning(measured_on: Mapping[str, object] | None, path: str,
                    current: Mapping[str, object] | None = None) -> str | None:
    """The warning for a saved config read on another machine, or None."""
    if not measured_on:
        return None
    diffs = machine_differences(measured_on, current or this_machine())
    if not diffs:
        return None
    return (f"{path} was tuned on another machine ({'; '.join(diffs)}): its Grain settings "
            "may not suit this one; re-run pipecheck dataloader or compare with "
            "--save-config here")


def config_text(config: RunConfig, settings: GrainSettings, measured: Mapping[str, object],
                machine: Mapping[str, object] | None = None) -> str:
    """The YAML of a saved config: the run's keys with the chosen Grain settings."""
    values = config.to_dict()
    values.update({
        "num_workers": settings.workers,
        "per_worker_buffer_size": settings.per_worker_buffer,
        "num_threads": settings.threads,
        "prefetch_buffer_size": settings.prefetch,
    })
    values[MEASURED_ON] = {**(machine or this_machine()), **measured}
    header = ("# Grain settings chosen by pipecheck. Read back with --config FILE, or in your "
              "code:\n#   mp_options, read_options = pipecheck.grain_options(FILE)\n")
    return header + yaml.safe_dump(values, sort_keys=False)


def save_config(path: str, config: RunConfig, settings: GrainSettings,
                measured: Mapping[str, object], force: bool = False) -> None:
    """Write the saved config atomically (never half-written)."""
    store.write_text_atomic(path, config_text(config, settings, measured), force)


def settings_of(values: Mapping[str, object], path: str) -> GrainSettings:
    """The Grain settings in a config file's values; unset knobs take pipecheck's defaults."""
    keys = {k.name: k for k in GRAIN_KEYS}
    if values.get("num_workers") is None:
        raise ConfigError(f"{path} holds no Grain settings (num_workers is missing); write one "
                          "with pipecheck dataloader --save-config FILE or pipecheck compare "
                          "--save-config FILE")
    got: dict[str, int | None] = {
        name: keys[name].coerce(values[name]) if values.get(name) is not None else None
        for name in ("num_workers", "per_worker_buffer_size", "num_threads",
                     "prefetch_buffer_size")}
    threads = got["num_threads"] if got["num_threads"] is not None else DEFAULT_THREADS
    return GrainSettings(
        workers=int(got["num_workers"] or 0),  # checked set above
        per_worker_buffer=got["per_worker_buffer_size"] or DEFAULT_PER_WORKER_BUFFER,
        threads=threads,
        prefetch=got["prefetch_buffer_size"] or 0,
    )


def config_settings(config: RunConfig) -> GrainSettings | None:
    """The Grain settings a resolved config fixes (None when ``num_workers`` is unset)."""
    if config.get("num_workers") is None:
        return None
    return settings_of(config.values, config.source)


def grain_options(
    path: str | os.PathLike[str],
) -> tuple[grain.MultiprocessingOptions, grain.ReadOptions]:
    """``(grain.MultiprocessingOptions, grain.ReadOptions)`` from a config saved by
    ``--save-config``. Warns (``UserWarning``) when it was measured on another machine."""
    values = read_config_file(str(path))
    warning = machine_warning(values.get(MEASURED_ON), str(path))
    if warning:
        warnings.warn(warning, stacklevel=2)
    return settings_of(values, str(path)).options()
