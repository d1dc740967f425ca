"""Workload registry: built-in ``demo`` and ``calibrated``, and user entry points."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pipecheck.config import COMMON_KEYS, Key, RunConfig
from pipecheck.errors import ConfigError
from pipecheck.workloads.base import Workload

BUILTIN = ("demo", "calibrated")


def keys_for_workload(workload: Any) -> Sequence[Key]:
    """The config keys a workload accepts (common keys included)."""
    if isinstance(workload, Mapping):
        from pipecheck.workloads import user

        return (*COMMON_KEYS, *user.KEYS)
    if workload == "demo":
        from pipecheck.workloads import demo

        return demo.KEYS
    if workload == "calibrated":
        from pipecheck.workloads import calibrated

        return calibrated.KEYS
    raise ConfigError(
        f"unknown workload {workload!r}; use one of {', '.join(BUILTIN)}, or a mapping of "
        "entry points (workload: {train_step: 'pkg.mod:fn', init: ..., dataset: ...})"
    )


def workload_label(workload: Any) -> str:
    return "user" if isinstance(workload, Mapping) else repr(workload)


def build_workload(config: RunConfig) -> Workload:
    """Build the workload a config names (sets up devices and the Mesh)."""
    if config.workload == "demo":
        from pipecheck.workloads import demo

        return demo.build(config)
    if config.workload == "calibrated":
        from pipecheck.workloads import calibrated

        return calibrated.build(config)
    if config.workload == "user":
        from pipecheck.workloads import user

        return user.build(config)
    keys_for_workload(config.workload)  # raises the one-line error
    raise AssertionError("unreachable")
