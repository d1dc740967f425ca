"""User workloads: point pipecheck at your own code with entry points.

    workload:
      init: mypkg.train:init_state          # (config: dict) -> state pytree
      train_step: mypkg.train:train_step    # (state, batch) -> (state, {"loss": ...})
      dataset: mypkg.data:make_dataset      # (config: dict) -> Grain dataset of batches
      batch: mypkg.data:example_batch       # optional: (config: dict) -> one batch (numpy dict)
    batch_size: 32
    params: {hidden: 512}                   # passed to your functions in config["params"]

Entry points are ``module:function`` (importable from the current directory)
or ``path/to/file.py:function``. A train step that is not jitted yet is jitted.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
import sys
import types
from typing import Any, Callable

import cloudpickle
import numpy as np

from pipecheck.config import Key, RunConfig
from pipecheck.data.grain_pipeline import first_batch
from pipecheck.errors import ConfigError
from pipecheck.step_types import PyTree
from pipecheck.user_code import GuardedStep, guarded, pipeline_error, remember_user_file
from pipecheck.workloads.base import Workload, spec_of, tokens_key_of
from pipecheck.workloads.devices import batch_sharding, check_splits, data_mesh, replicated
from pipecheck.workloads.step_styles import UserStep, place_state

KEYS: tuple[Key, ...] = (
    Key("params", dict, {}, "free-form settings passed to your entry points as config['params']"),
    Key("tokens_key", str, None, "the batch entry holding token ids, for tokens/s (unset: "
        "`tokens`, `inputs`, `input_ids`, else the first integer [batch, seq] entry)"),
)
ROLES_REQUIRED = ("init", "train_step")
ROLES_OPTIONAL = ("dataset", "batch")


USER_MODULE_PREFIX = "pipecheck_user_"


def import_file(path: pathlib.Path, role: str) -> types.ModuleType:
    """Import ``path/to/file.py`` so that Grain's worker processes can use what it defines.

    The file is imported as ``pipecheck_user_<stem>`` (a name of its own, so it shadows
    nothing); spawned workers could not import that name, so cloudpickle (which Grain uses
    to send the dataset to its workers) is told to pickle the module's functions and
    classes by value. The file's directory is put on ``sys.path``, as ``python file.py``
    does, so the file can import its sibling modules; spawned workers inherit ``sys.path``.
    """
    if not path.is_file():
        raise ConfigError(f"workload.{role}: file {path} does not exist")
    path = path.resolve()
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(path) and \
                getattr(module, "__name__", "").startswith(USER_MODULE_PREFIX):
            return module  # the same file names several roles: import it once
    base = USER_MODULE_PREFIX + re.sub(r"\W", "_", path.stem)
    name, suffix = base, 1
    while name in sys.modules:  # two files with the same stem
        suffix += 1
        name = f"{base}_{suffix}"
    mod_spec = importlib.util.spec_from_file_location(name, path)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    try:
        mod_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    cloudpickle.register_pickle_by_value(module)
    remember_user_file(str(path))
    return module


def load_entry_point(spec: str, role: str) -> Callable[..., Any]:
    # Any: the user's function, of a signature and result pipecheck cannot know
    """Import ``module:function`` or ``file.py:function``; one-line errors."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"workload.{role} = {spec!r} is not an entry point; write it as "
            "'package.module:function' or 'path/to/file.py:function'"
        )
    try:
        if module_name.endswith(".py"):
            module = import_file(pathlib.Path(module_name), role)
        else:
            if "" not in sys.path and str(pathlib.Path.cwd()) not in sys.path:
                sys.path.insert(0, str(pathlib.Path.cwd()))
            module = importlib.import_module(module_name)
    except ConfigError:
        raise
    except ImportError as e:
        raise ConfigError(f"workload.{role}: cannot import {module_name!r} ({e})") from None
    except Exception as e:
        raise ConfigError(
            f"workload.{role}: importing {module_name!r} failed: {type(e).__name__}: {e}"
        ) from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ConfigError(f"workload.{role}: module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise ConfigError(f"workload.{role}: {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def checked_entries(config: RunConfig) -> dict[str, str]:
    """The config's entry points (role -> spec), every required role present."""
    entries = dict(config.entry_points or {})
    unknown = set(entries) - set(ROLES_REQUIRED) - set(ROLES_OPTIONAL)
    if unknown:
        raise ConfigError(
            f"unknown workload entry point(s) {', '.join(sorted(unknown))}; known: "
            f"{', '.join(ROLES_REQUIRED + ROLES_OPTIONAL)}"
        )
    for role in ROLES_REQUIRED:
        if role not in entries:
            raise ConfigError(f"workload.{role} is missing; user workloads need "
                              f"{' and '.join(ROLES_REQUIRED)} entry points")
    if "dataset" not in entries and "batch" not in entries:
        raise ConfigError("a user workload needs workload.dataset or workload.batch "
                          "(to know the batch's shapes)")
    return entries


def build(config: RunConfig) -> Workload:
    entries = checked_entries(config)
    raw = {role: load_entry_point(spec, role) for role, spec in entries.items()}
    fns = {role: guarded(role, fn) for role, fn in raw.items()}
    user_config = config.to_dict()
    n_dev = config["devices"]
    mesh = data_mesh(n_dev)
    if "batch" in fns:
        example = dict(fns["batch"](user_config))
    else:
        dataset = fns["dataset"](user_config)
        try:
            example = first_batch(dataset)
        except Exception as e:  # noqa: BLE001 - the user's dataset may raise anything
            raise pipeline_error(e, "workers=0, threads=0") from None
    example = {k: np.asarray(v) for k, v in example.items()}
    for k, v in example.items():
        if v.ndim == 0:
            raise ConfigError(f"batch entry {k!r} is a scalar; every batch entry needs a "
                              "leading batch axis to split over the devices")
        check_splits(v.shape[0], n_dev, f"batch entry {k!r} with shape {v.shape} (first axis)",
                     f"devices={n_dev}")
    spec = spec_of(example, batch_sharding(mesh))
    step = raw["train_step"]
    user_step = UserStep(step)
    name = str(getattr(step, "__name__", None)
               or getattr(getattr(step, "__wrapped__", None), "__name__", "train_step"))
    rep = replicated(mesh)

    def init_state() -> PyTree:
        state = fns["init"](user_config)
        user_step.use_style(state)  # NNX objects: the step updates them in place
        return place_state(state, rep)

    dataset = (lambda: fns["dataset"](user_config)) if "dataset" in fns else None
    return Workload(
        name="user",
        config=config,
        mesh=mesh,
        train_step=GuardedStep(user_step),
        train_step_name=name,
        init_state=init_state,
        batch_spec=spec,
        host_batch=lambda: example,
        dataset=dataset,
        tokens_key=tokens_key_of(example, config.get("tokens_key")),
    )
