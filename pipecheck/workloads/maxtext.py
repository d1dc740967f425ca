"""MaxText as a pipecheck workload: MaxText's own config file and ``key=value`` overrides,
exactly as MaxText's train takes them, built in this process through MaxText's own modules.

- the model, its state and the sharded, jitted train step: MaxText's ``setup_train_loop``
  and ``jit_train_and_eval_step`` (as its ``train_loop`` calls them), the step called under
  MaxText's mesh and logical axis rules, as its loop calls it;
- T's batch: one of MaxText's synthetic batches (``dataset_type=synthetic``, same shapes);
- D's pipeline: the Grain pipeline MaxText's ``create_data_iterator`` builds (tokenizer,
  packing and all), built again for each setting of MaxText's own Grain keys
  (``GRAIN_KEY_OF``), and put on the devices the way MaxText's loader puts it;
- R's host work: MaxText's metric logger every step, its checkpoint and eval at its periods
  (``real_hooks``).

MaxText is imported inside the functions that use it (``import pipecheck`` never imports it).
Every MaxText config error becomes one line naming the key or file (``maxtext_error``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
from typing import Any, Callable, Iterator, Mapping, Sequence

import yaml

from pipecheck.config import GRAIN_KEYS, Key, RunConfig
from pipecheck.data.grain_pipeline import ensure_absl_flags_parsed
from pipecheck.data.per_setting import PerSetting
from pipecheck.errors import ConfigError
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.step_types import Batch

NAME = "maxtext"
KEYS: tuple[Key, ...] = (
    Key("maxtext_config", str, "", "MaxText's config file (the first argument of its train)"),
    Key("maxtext_overrides", str, "", "MaxText's key=value overrides, shell-quoted, in order"),
    *GRAIN_KEYS,
)
GRAIN_KEY_OF: Mapping[str, str] = {
    "workers": "grain_worker_count",
    "per_worker_buffer": "grain_per_worker_buffer_size",
    "threads": "grain_num_threads",
    "prefetch": "grain_prefetch_buffer_size",
}
"""pipecheck's Grain knobs (``GrainSettings`` fields) -> MaxText's keys that set them."""
TOKENS_KEY = "inputs"
"""MaxText's batch entry of token ids."""
LOSS_KEY = "learning/loss"
"""Where MaxText's train step returns its loss (``metrics["scalar"]``)."""


def config_of(config_file: str, overrides: Sequence[str]) -> dict[str, str]:
    """The RunConfig values of a MaxText run: ``workload: maxtext``, its config file and
    overrides (for ``workloads.resolve``)."""
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ConfigError(f"MaxText override {item!r} is not key=value (as MaxText's train "
                              "takes them, e.g. steps=100)")
    return {"workload": NAME, "maxtext_config": config_file,
            "maxtext_overrides": shlex.join(overrides)}


def argv_of(config: RunConfig, **extra: object) -> list[str]:
    """MaxText's argv for ``config`` (what ``python -m maxtext.trainers.pre_train.train``
    receives), with ``extra`` keys appended (the last value of a key wins in MaxText)."""
    path = config["maxtext_config"]
    if not path:
        raise ConfigError("no MaxText config file; give --maxtext CONFIG.yml")
    more = [f"{k}={_value(v)}" for k, v in extra.items()]
    return ["train", path, *shlex.split(config["maxtext_overrides"]), *more]


def _value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def settings_overrides(settings: GrainSettings) -> dict[str, int]:
    """MaxText's Grain keys for ``settings``."""
    return {key: int(getattr(settings, field)) for field, key in GRAIN_KEY_OF.items()}


def overrides_text(settings: GrainSettings) -> str:
    """``grain_worker_count=4 grain_per_worker_buffer_size=2 ...``: the setting as MaxText's
    command line takes it."""
    return " ".join(f"{k}={v}" for k, v in settings_overrides(settings).items())


def read_overrides_text(settings: GrainSettings) -> str:
    """``grain_num_threads=16 grain_prefetch_buffer_size=32``: the read knobs of ``settings``
    as MaxText's overrides (a storage fix names only these)."""
    overrides = settings_overrides(settings)
    return " ".join(f"{GRAIN_KEY_OF[f]}={overrides[GRAIN_KEY_OF[f]]}"
                    for f in ("threads", "prefetch"))


# --- errors -------------------------------------------------------------------------------
_MODEL_ERROR = "Value error, "
"""How pydantic starts the line of an error raised by a rule over several keys (MaxText's
"Please specify grain_eval_files ... or set eval_interval to <=0.")."""


def maxtext_error(e: BaseException, what: str) -> ConfigError:
    """One line for a MaxText failure while ``what`` (reading the config, building the
    pipeline, ...): the key or file it names, else MaxText's own first line."""
    text = str(e).strip()
    lines = [line.strip() for line in text.splitlines()]
    first = lines[0] if text else type(e).__name__
    name = type(e).__name__
    if name == "ValidationError" and len(lines) >= 2 and \
            lines[1].startswith(_MODEL_ERROR):  # pydantic: a rule of keys
        why = lines[1][len(_MODEL_ERROR):].split(" [type=")[0]
        return ConfigError(f"MaxText config: {why}")
    if name == "ValidationError" and len(lines) >= 3:  # pydantic: key, then why
        return ConfigError(f"MaxText config key {lines[1]}: {lines[2]}")
    if isinstance(e, ValueError) and first.startswith("'") and "' not in " in first:
        key = first.split("'")[1]
        return ConfigError(f"unknown MaxText config key {key!r}; check its spelling against "
                           "MaxText's configs/base.yml")
    if isinstance(e, FileNotFoundError) and "matching pattern" in first:
        return ConfigError(f"MaxText's data files: {first}; check grain_train_files "
                           "(or grain_eval_files)")
    if isinstance(e, FileNotFoundError):
        where = e.filename or first
        return ConfigError(f"MaxText {what}: file {where} does not exist")
    if "tokenizer" in first.lower():
        return ConfigError(f"MaxText's tokenizer_path: {first}")
    return ConfigError(f"MaxText {what} failed: {name}: {first}")


@contextlib.contextmanager
def _quiet_absl() -> Iterator[None]:
    """MaxText logs a config error at length on absl's logger before raising it: pipecheck
    says it in one line instead."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def hyperparameters(config: RunConfig, **extra: object) -> Any:
    # Any: MaxText's HyperParameters (MaxText ships no type information)
    """MaxText's config object for ``config`` (and ``extra`` keys), read by MaxText's
    ``pyconfig.initialize``; a config error is one line."""
    argv = argv_of(config, **extra)
    try:
        # lazy: MaxText imported only for a MaxText workload
        from maxtext.configs import pyconfig
    except ImportError as e:
        raise ConfigError(f"--maxtext needs MaxText installed in this Python ({e}); install "
                          "pipecheck into MaxText's environment (docs/maxtext.md)") from None
    try:
        with _quiet_absl():
            return pyconfig.initialize(argv)
    except Exception as e:  # noqa: BLE001 - MaxText raises many kinds for a bad config
        raise maxtext_error(e, "config") from None


# --- the pipeline (D) ---------------------------------------------------------------------
class _Captured:
    """Stands in for MaxText's ``MultiHostDataLoadIterator`` while its pipelines are built:
    keeps what MaxText gives it (the Grain dataset it would iterate, and the rest of its
    arguments), and starts nothing."""

    def __init__(self, dataloader: Any, *args: object, **kwargs: object) -> None:
        self.dataloader, self.args, self.kwargs = dataloader, args, kwargs


def _captured_iterators(hp: Any, mesh: Any) -> tuple[Any, Any]:
    """``create_data_iterator(hp, mesh)``'s (train, eval) iterators as MaxText makes them,
    each ``MultiHostDataLoadIterator`` it would make a ``_Captured`` instead."""
    if hp.dataset_type != "grain":
        raise ConfigError(f"MaxText's dataset_type is {hp.dataset_type!r}; pipecheck times and "
                          "tunes MaxText's Grain pipeline: set dataset_type=grain")
    from maxtext.input_pipeline import input_pipeline_interface, multihost_dataloading

    original = multihost_dataloading.MultiHostDataLoadIterator
    multihost_dataloading.MultiHostDataLoadIterator = _Captured  # type: ignore[misc]
    try:
        with _quiet_absl():
            made = input_pipeline_interface.create_data_iterator(hp, mesh)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - MaxText's pipeline raises many kinds
        raise maxtext_error(e, "input pipeline") from None
    finally:
        multihost_dataloading.MultiHostDataLoadIterator = original  # type: ignore[misc]
    return made[0], made[1]


def grain_dataset(hp: Any, mesh: Any) -> Any:
    # Any: MaxText's config and mesh; a grain.IterDataset (Grain ships no types)
    """The Grain IterDataset MaxText's ``create_data_iterator`` builds for training with
    ``hp`` (the one its ``MultiHostDataLoadIterator`` iterates), not yet iterated."""
    train, _ = _captured_iterators(hp, mesh)
    if not isinstance(train, _Captured):
        raise ConfigError("this process loads no real data in MaxText's set-up "
                          "(expansion_factor_real_data); run pipecheck on a loading host")
    return train.dataloader


def eval_iterator(hp: Any, mesh: Any) -> Any:
    # Any: MaxText's config, mesh and iterator (MaxText ships no types)
    """MaxText's eval iterator for ``hp`` as its ``create_data_iterator`` makes it (its
    ``MultiHostDataLoadIterator`` over the eval pipeline, or its placeholder on a host that
    loads no eval data); None when ``eval_interval <= 0``. Built apart from the training
    pipeline (its own files, unshuffled), so the batches training gets are unchanged."""
    _, made = _captured_iterators(hp, mesh)
    if not isinstance(made, _Captured):
        return made
    from maxtext.input_pipeline import multihost_dataloading

    try:
        return multihost_dataloading.MultiHostDataLoadIterator(made.dataloader, *made.args,
                                                                **made.kwargs)
    except Exception as e:  # noqa: BLE001 - MaxText's pipeline raises many kinds
        raise maxtext_error(e, "eval pipeline") from None


def make_put(hp: Any, mesh: Any) -> Callable[[Batch], Batch]:
    """A host batch to the devices as MaxText does it: ``MultiHostDataLoadIterator`` forms
    each global array from this host's part, then its DataLoader puts the batch with the
    input data sharding."""
    import jax
    from maxtext.input_pipeline import multihost_dataloading
    from maxtext.utils.sharding import get_input_data_sharding

    shardings = get_input_data_sharding(hp, mesh)

    def put(batch: Batch) -> Batch:
        arrays = jax.tree_util.tree_map_with_path(
            lambda path, a: multihost_dataloading._form_global_array(path, a, mesh), batch)
        return jax.device_put(arrays, shardings)  # type: ignore[no-any-return]

    return put


def pipeline(config: RunConfig, mesh: Any = None) -> tuple[PerSetting, Callable[[Batch], Batch]]:
    """MaxText's Grain pipeline, built per setting of its Grain keys, and its device put."""
    from maxtext.utils import maxtext_utils

    ensure_absl_flags_parsed()
    hp = hyperparameters(config)
    mesh = mesh if mesh is not None else maxtext_utils.get_mesh_from_config(hp)
    grain_dataset(hp, mesh)  # the user's own setting builds: errors before any measurement

    def build(settings: GrainSettings) -> Any:
        return grain_dataset(hyperparameters(config, **settings_overrides(settings)), mesh)

    return PerSetting(build, "MaxText's"), make_put(hp, mesh)


def own_setting(config: RunConfig) -> GrainSettings:
    """The Grain setting the MaxText config itself asks for (its four Grain keys)."""
    hp = hyperparameters(config)
    return GrainSettings(workers=max(0, int(hp.grain_worker_count)),
                         per_worker_buffer=int(hp.grain_per_worker_buffer_size),
                         threads=int(hp.grain_num_threads),
                         prefetch=int(hp.grain_prefetch_buffer_size))


# --- what compare hands back, as MaxText takes it ------------------------------------------
def recommendation(text: str, settings: GrainSettings | None) -> str:
    """compare's recommendation with the setting written as MaxText overrides."""
    if settings is None:
        return text
    advice = settings.advice()
    if advice in text:
        return text.replace(advice, f"MaxText's {overrides_text(settings)}")
    return f"{text} (MaxText's Grain keys as measured: {overrides_text(settings)})"


def saved_config_text(config: RunConfig, settings: GrainSettings,
                      measured: Mapping[str, object]) -> str:
    """A MaxText config file: the user's config as its ``base_config``, then the user's
    overrides, then the chosen Grain keys (later keys win), so that
    ``python -m maxtext.trainers.pre_train.train FILE`` trains the run with the setting
    (and ``pipecheck compare --maxtext FILE`` measures it again)."""
    base = os.path.abspath(config["maxtext_config"])
    values: dict[str, object] = {"base_config": base}
    for item in shlex.split(config["maxtext_overrides"]):
        key, _, value = item.partition("=")
        values[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    values.update(settings_overrides(settings))
    facts = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in measured.items() if v is not None)
    head = (f"# Written by pipecheck: MaxText's Grain keys chosen ({overrides_text(settings)})\n"
            f"# measured: {facts}\n"
            "# train with: python -m maxtext.trainers.pre_train.train THIS_FILE [key=value ...]\n")
    return head + yaml.safe_dump(values, sort_keys=False)
