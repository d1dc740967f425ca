"""The workload registry: each workload's name -> its kind (``WorkloadKind``: its config
keys, how to build it and its input pipeline alone, and what a framework does its own way:
its own Grain setting, its host work in the real-data run, how it writes a setting and a
saved config); and ``resolve``, which turns config layers into a validated RunConfig with
the keys of the workload it names.

Built in: ``demo`` and ``calibrated``; a mapping of entry points is a ``user`` workload;
``maxtext`` comes from ``--maxtext CONFIG.yml``. The commands and ``compare_run`` ask the
kind (``kind_of``), never which workload they have.
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
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.step_types import Batch, StepHook
from pipecheck.workloads import calibrated, demo, maxtext, maxtext_model, user
from pipecheck.workloads.base import Workload


def no_own_setting(config: RunConfig) -> GrainSettings | None:
    """A workload configured by pipecheck's keys alone asks for no Grain setting of its own."""
    return None


def no_hooks(config: RunConfig, workload: Workload, steps: int) -> tuple[StepHook, ...]:
    """A workload whose training loop is pipecheck's does no host work of its own."""
    return ()


def as_written(text: str, settings: GrainSettings | None) -> str:
    """compare's recommendation as the core wrote it (Grain's own options)."""
    return text


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
    own_setting: Callable[[RunConfig], GrainSettings | None] = no_own_setting
    """The Grain setting the workload's own config asks for (MaxText's four Grain keys):
    ``dataloader``'s knobs where neither an option nor pipecheck's keys give them (None:
    pipecheck's defaults)."""
    real_hooks: Callable[[RunConfig, Workload, int], tuple[StepHook, ...]] = no_hooks
    """The framework's own host work after each step of compare's real-data run of that many
    steps (MaxText's metric logger, checkpoint and eval), added to the workload's hooks."""
    setting_text: Callable[[GrainSettings], str] = GrainSettings.label
    """A setting as the user gives it to this workload (MaxText: its overrides)."""
    saved_config_text: Callable[[RunConfig, GrainSettings, Mapping[str, object]], str] | \
        None = None
    """``--save-config``'s file, written the framework's way: the config with the chosen
    setting and what was measured (MaxText: a MaxText config file over the user's; None:
    pipecheck's own YAML, ``tuned_config.config_text``)."""
    recommendation: Callable[[str, GrainSettings | None], str] = as_written
    """compare's recommendation with the chosen setting written the workload's way."""
    read_options_text: Callable[[GrainSettings], str] = GrainSettings.read_options_text
    """A setting's read threads and read prefetch as the user sets them (a storage-bound
    finding's fix): Grain's ReadOptions; MaxText: ``grain_num_threads=...
    grain_prefetch_buffer_size=...``."""
    own_config: Callable[[str, Sequence[str]], Mapping[str, str]] | None = None
    """A framework configured by its own config file and ``key=value`` overrides, as its
    command line takes them (``--maxtext CONFIG.yml key=value ...``): the file and the
    overrides as the values ``resolve`` takes (None: configured by pipecheck's keys)."""


REGISTRY: Mapping[str, WorkloadKind] = {
    "demo": WorkloadKind(demo.KEYS, demo.build, demo.make_dataset, "tokens"),
    "calibrated": WorkloadKind(calibrated.KEYS, calibrated.build, calibrated.make_dataset),
    "user": WorkloadKind((*COMMON_KEYS, *user.KEYS), user.build),
    maxtext.NAME: WorkloadKind(maxtext.KEYS, maxtext_model.build, None, maxtext.TOKENS_KEY,
                               maxtext.pipeline, own_setting=maxtext.own_setting,
                               real_hooks=maxtext_model.real_hooks,
                               setting_text=maxtext.overrides_text,
                               saved_config_text=maxtext.saved_config_text,
                               recommendation=maxtext.recommendation,
                               read_options_text=maxtext.read_overrides_text,
                               own_config=maxtext.config_of),
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


def _own_configured(workload: object) -> bool:
    """A framework's workload, configured by its own config file (``own_config``)."""
    return isinstance(workload, str) and workload in REGISTRY and \
        REGISTRY[workload].own_config is not None


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
    elif workload in BUILTIN or _own_configured(workload):  # maxtext: from --maxtext
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
