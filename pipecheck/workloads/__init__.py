"""The workload registry: each workload's name -> its config keys, how to build it, and how
to build its input pipeline alone; and ``resolve``, which turns config layers into a
validated RunConfig with the keys of the workload it names.

Built in: ``demo`` and ``calibrated``; a mapping of entry points is a ``user`` workload.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

from pipecheck.config import (
    COMMON_KEYS,
    DEFAULT_WORKLOAD,
    MEASURED_ON,
    Key,
    RunConfig,
    parse_set_option,
)
from pipecheck.data.grain_pipeline import InputPipeline
from pipecheck.errors import ConfigError
from pipecheck.step_types import Batch
from pipecheck.workloads import calibrated, demo, maxtext, maxtext_model, user
from pipecheck.workloads.base import Workload


@dataclasses.dataclass(frozen=True)
class WorkloadKind:
    """What the registry knows about one workload."""

    keys: Sequence[Key]
    build: Callable[[RunConfig], Workload]
    """Sets up devices and the Mesh, builds the model and its jitted train step."""
    dataset: Callable[[RunConfig], InputPipeline] | None = None
    """The input pipeline without the model (None: build the workload to get it)."""
    tokens_key: str | None = None
    loader: Callable[[RunConfig], tuple[InputPipeline, Callable[[Batch], Batch]]] | None = None
    """The input pipeline without the model, with its own device put (MaxText's), where
    the framework builds both: ``(pipeline, put)``."""


REGISTRY: Mapping[str, WorkloadKind] = {
    "demo": WorkloadKind(demo.KEYS, demo.build, demo.make_dataset, "tokens"),
    "calibrated": WorkloadKind(calibrated.KEYS, calibrated.build, calibrated.make_dataset),
    "user": WorkloadKind((*COMMON_KEYS, *user.KEYS), user.build),
    maxtext.NAME: WorkloadKind(maxtext.KEYS, maxtext_model.build, None, maxtext.TOKENS_KEY,
                               maxtext.pipeline),
}
BUILTIN = ("demo", "calibrated")


def _unknown(workload: object) -> ConfigError:
    return ConfigError(
        f"unknown workload {workload!r}; use one of {', '.join(BUILTIN)}, or a mapping of "
        "entry points (workload: {train_step: 'pkg.mod:fn', init: ..., dataset: ...})"
    )


def kind_of(name: str) -> WorkloadKind:
    """The registry entry of a RunConfig's workload name."""
    if name not in REGISTRY:
        raise _unknown(name)
    return REGISTRY[name]


def build_workload(config: RunConfig) -> Workload:
    """Build the workload a config names (sets up devices and the Mesh)."""
    return kind_of(config.workload).build(config)


def resolve(file_values: Mapping[str, Any] | None = None, overrides: Sequence[str] = (),
            source: str = "defaults") -> RunConfig:
    """Merge the workload's defaults, file values and ``--set`` overrides (later ones win)
    into a validated RunConfig."""
    raw: dict[str, Any] = dict(file_values or {})
    measured_on = raw.pop(MEASURED_ON, None)
    if measured_on is not None and not isinstance(measured_on, Mapping):
        raise ConfigError(f"{MEASURED_ON} in the config file must be a mapping (as "
                          f"--save-config writes it), got {measured_on!r}")
    parsed_overrides = [parse_set_option(item) for item in overrides]
    for key, value in parsed_overrides:
        if key == "workload":
            raw["workload"] = value
    workload = raw.pop("workload", DEFAULT_WORKLOAD)
    if isinstance(workload, Mapping):
        keys = REGISTRY["user"].keys
    elif workload in BUILTIN or workload == maxtext.NAME:  # maxtext: from --maxtext
        keys = REGISTRY[workload].keys
    else:
        raise _unknown(workload)
    known = {k.name: k for k in keys}
    label = "user" if isinstance(workload, Mapping) else repr(workload)
    values: dict[str, Any] = {name: k.default for name, k in known.items()}

    def apply(key: str, value: object, origin: str) -> None:
        if key not in known:
            names = ", ".join(sorted(known))
            raise ConfigError(
                f"unknown config key {key!r} ({origin}) for workload {label}; known keys: {names}"
            )
        values[key] = known[key].coerce(value)

    for key, value in raw.items():
        apply(str(key), value, "in config file")
    for key, value in parsed_overrides:
        if key != "workload":
            apply(key, value, "in --set")
    if isinstance(workload, Mapping):
        return RunConfig("user", values, source, {str(k): str(v) for k, v in workload.items()},
                         measured_on)
    return RunConfig(str(workload), values, source, measured_on=measured_on)
