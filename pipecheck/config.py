"""Run configuration: a workload name plus flat, typed keys.

A config is built from three layers, later ones winning: the workload's
defaults, a YAML file (``--config PATH``), and ``--set key=value`` overrides.
Keys are flat (``--set compute_ms=60``); each workload declares the keys it
accepts, with a type, a default and a check, so a typo is an error, not a
silently ignored setting.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping

import yaml

from pipecheck.errors import ConfigError

DEFAULT_WORKLOAD = "demo"
MEASURED_ON = "measured_on"
"""The section of a saved config (``--save-config``) that records where it was measured."""


@dataclasses.dataclass(frozen=True)
class Key:
    """One config key a workload accepts."""

    name: str
    type: type
    # Any: a key's value is of the key's own ``type`` (int, float, str, bool, dict), known
    # at run time; RunConfig's values and ``config[key]`` are typed the same way
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None

    def coerce(self, value: Any) -> Any:
        """Convert ``value`` to this key's type and check it, or raise ConfigError."""
        expected = self.type.__name__
        if value is None and self.default is None:  # an optional key left unset
            return None
        if self.type is bool:
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
                value = value.lower() in ("true", "yes", "1")
            if not isinstance(value, bool):
                raise ConfigError(f"{self.name} must be true or false, got {value!r}")
        elif self.type in (int, float):
            if isinstance(value, str):
                try:
                    value = yaml.safe_load(value)
                except yaml.YAMLError:
                    pass
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{self.name} must be a number ({expected}), got {value!r}")
            if self.type is int:
                if float(value) != int(value):
                    raise ConfigError(f"{self.name} must be a whole number, got {value!r}")
                value = int(value)
            else:
                value = float(value)
        elif self.type is str:
            if not isinstance(value, str):
                value = str(value)
        elif self.type is dict:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{self.name} must be a mapping, got {value!r}")
            value = dict(value)
        if self.choices is not None and value not in self.choices:
            allowed = " | ".join(str(c) for c in self.choices)
            raise ConfigError(f"{self.name} must be one of {allowed}, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(f"{self.name} must be >= {self.minimum:g}, got {value!r}")
        return value


GRAIN_KEYS: tuple[Key, ...] = (
    Key("num_workers", int, None, "Grain worker processes (MultiprocessingOptions.num_workers); "
        "unset: compare searches it, dataloader takes --workers", minimum=0),
    Key("per_worker_buffer_size", int, None, "batches each worker may hold ready "
        "(MultiprocessingOptions.per_worker_buffer_size); unset: 2", minimum=1),
    Key("num_threads", int, None, "read threads per process (ReadOptions.num_threads); "
        "unset: 1", minimum=0),
    Key("prefetch_buffer_size", int, None, "elements the read threads prefetch "
        "(ReadOptions.prefetch_buffer_size); unset: 2 x num_threads", minimum=1),
    Key("run_steps", int, 0, "length of your training run, in steps: a setting whose start-up "
        "(first batch) costs more than its faster batches save over the run is not chosen; "
        "0: a long run, start-up not weighed", minimum=0),
)
"""Grain's performance knobs, as ``--save-config`` writes them (``pipecheck.grain_options``
reads them back into Grain's option objects)."""

COMMON_KEYS: tuple[Key, ...] = (
    Key("batch_size", int, 32, "examples per global batch (split over devices)", minimum=1),
    Key("devices", int, 1, "number of CPU devices to emulate (a Mesh over the 'data' axis)",
        minimum=1),
    Key("seed", int, 0, "seed for parameters, data order and shuffling", minimum=0),
    *GRAIN_KEYS,
)


def parse_set_option(item: str) -> tuple[str, str]:
    """Split one ``--set key=value`` item."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {item!r} (e.g. --set compute_ms=60)")
    return key, value.strip()


def read_config_file(path: str | pathlib.Path) -> dict[str, Any]:
    """Read a YAML config file into a mapping, with one-line errors."""
    p = pathlib.Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {p} is not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of keys, got {type(data).__name__}")
    return data


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A validated configuration: the workload's name and its complete, typed keys."""

    workload: str
    values: Mapping[str, Any]
    source: str = "defaults"
    entry_points: Mapping[str, str] | None = None
    """For user workloads: role -> "package.module:function"."""
    measured_on: Mapping[str, Any] | None = None
    """A saved config's record of the machine its Grain settings were measured on."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        workload: str | dict[str, str] = (dict(self.entry_points) if self.entry_points
                                          else self.workload)
        return {"workload": workload, **dict(self.values)}
