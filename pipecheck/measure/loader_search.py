"""compare's loader stage: D(W) searched over worker counts, or read from a file.

The search measures one setting at a time (``dataloader.measure_setting``) and lets the
tuner pick the next worker count; Grain's RAM-based pick_performance_config caps it. Either
way the result is the settings in the order tried, the chosen one, and the tuning outcome.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Mapping, Sequence

from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.analysis.tuner import Trial, TuningOutcome, outcome, tune
from pipecheck.config import RunConfig
from pipecheck.errors import ConfigError, ResultFormatError
from pipecheck.measure.dataloader import BUFFER_WARNING_FACTOR, LoaderParts, measure_setting
from pipecheck.measure.pipeline import build_iter_dataset
from pipecheck.records import store
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting
from pipecheck.records.env import input_warnings
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER
from pipecheck.report.format import ms

DEFAULT_BATCHES = 30
"""Batches timed per loader setting (more with many workers, see ``batches_for``)."""
DEFAULT_MAX_WORKERS = max(8, 2 * (os.cpu_count() or 1))
"""Above the core count on purpose: latency-bound pipelines keep gaining past the cores."""
RAM_BUDGET_FRACTION = 0.5
"""Share of the available RAM Grain's pick_performance_config may plan workers for."""
TUNING_STAGE_WAIT_S = 0.5
"""During the worker search, stage reports are not waited for long (they lag ~5 s)."""


@dataclasses.dataclass(frozen=True)
class LoaderChoice:
    """The loader settings measured (or read), the one chosen, and why."""

    settings: tuple[LoaderSetting, ...]
    """In the order tried."""
    chosen: LoaderSetting
    tuning: TuningOutcome
    warnings: tuple[str, ...] = ()

    @property
    def baseline(self) -> LoaderSetting | None:
        """The first setting tried, when another one was chosen."""
        first = self.settings[0]
        return None if first is self.chosen else first


def batches_for(workers: int, batches: int) -> int:
    """Batches to time for a worker count: enough that the batches the workers buffer while
    starting up (served instantly) cannot pass for the steady state."""
    return max(batches, BUFFER_WARNING_FACTOR * workers * DEFAULT_PER_WORKER_BUFFER)


def with_loader_time(setting: LoaderSetting) -> LoaderSetting:
    """The setting with D stored (files written before D was stored lack it)."""
    if setting.loader_time is not None:
        return setting
    return dataclasses.replace(setting, loader_time=loader_estimate(
        setting.batch_time.samples_s, setting.workers, setting.per_worker_buffer,
        parallel=setting.settings.parallel_reads()))


def _trial(setting: LoaderSetting) -> Trial:
    assert setting.loader_time is not None
    return Trial(setting.workers, setting.threads, setting.loader_time.value)


def _choice(settings: Sequence[LoaderSetting], tuning: TuningOutcome,
            warnings: Sequence[str]) -> LoaderChoice:
    by_key = {(s.workers, s.threads): s for s in settings}
    return LoaderChoice(tuple(settings), by_key[(tuning.chosen.workers, tuning.chosen.threads)],
                        tuning, tuple(warnings))


def read_loader(path: str, config: Mapping[str, Any], target_s: float) -> LoaderChoice:
    """The settings of a ``pipecheck dataloader --json`` file, and the choice among them."""
    result = store.load(path, expect=DataloaderResult)
    if not result.results:
        raise ResultFormatError(f"{path} holds no loader settings; re-run pipecheck dataloader "
                                "with --workers")
    settings = [with_loader_time(s) for s in result.results]
    tuning = outcome([_trial(s) for s in settings], target_s, os.cpu_count() or 1, "from-file",
                     f"settings read from {path}")
    return _choice(settings, tuning, input_warnings(path, result.env, result.config, config))


def ram_ceiling_workers(dataset: Any, max_workers: int) -> int | None:
    """Grain's element-size-based worker count for half the available RAM (a ceiling only:
    it never measures throughput)."""
    try:
        # lazy: keeps `import pipecheck` free of Grain
        import grain
        import psutil

        budget_mb = int(psutil.virtual_memory().available / 2**20 * RAM_BUDGET_FRACTION)
        cfg = grain.experimental.pick_performance_config(
            build_iter_dataset(dataset, 0, 0), ram_budget_mb=budget_mb, max_workers=max_workers,
            max_buffer_size=None)
        return int(cfg.multiprocessing_options.num_workers)
    except Exception:  # the ceiling is advisory; the search works without it
        return None


@dataclasses.dataclass(frozen=True)
class SearchOptions:
    batches: int
    threads: int
    max_workers: int
    workers: tuple[int, ...] | None = None
    """Fixed worker counts (--workers) instead of a search."""
    timeout_s: float | None = None
    agree: Callable[[float, str], float] | None = None
    """In a multi-process run: combine a value over the processes (``max``/``min``), so
    every host tries the same settings and chooses the same one, following the slowest."""


def search_loader(dataset: Any, put: Callable[[Any], Any], tokens_key: str | None,
                  target_s: float, opts: SearchOptions, *,
                  progress: Callable[[str], None], clock: Callable[[], float] = time.perf_counter
                  ) -> LoaderChoice:
    """Measure worker counts the tuner picks until one keeps up with ``target_s``."""
    if dataset is None:
        raise ConfigError("this workload has no dataset; pipecheck compare needs "
                          "workload.dataset (or --dataloader FILE and --real FILE)")
    agree = opts.agree or (lambda value, how: value)
    ceiling = ram_ceiling_workers(dataset, opts.max_workers)
    limit = opts.max_workers if ceiling is None else max(1, min(opts.max_workers, ceiling))
    limit = int(agree(limit, "min"))
    cores = int(agree(os.cpu_count() or 1, "min"))
    measured: dict[tuple[int, int], LoaderSetting] = {}

    def measure(w: int, t: int) -> float:
        n = batches_for(w, opts.batches)
        progress(f"[2/4] loader: {w} worker(s), {t} thread(s), {n} batches")
        s = measure_setting(dataset, w, t, n, put=put, tokens_key=tokens_key,
                            timeout_s=opts.timeout_s, clock=clock,
                            stage_wait_s=TUNING_STAGE_WAIT_S)
        measured[(w, t)] = s
        d = agree(_trial(s).batch_s, "max")
        slowest = "" if d == _trial(s).batch_s or opts.agree is None else \
            f" here, {ms(d)} on the slowest host"
        progress(f"      D({w}) = {ms(_trial(s).batch_s)} per batch{slowest}")
        return d

    tuning = tune(measure, target_s, max_workers=limit, cores=cores,
                  threads=opts.threads, fixed_workers=opts.workers)
    warnings = []
    if ceiling is not None and ceiling < opts.max_workers:
        warnings.append(f"the worker search was capped at {limit} workers by a RAM budget "
                        "(Grain's pick_performance_config)")
    return _choice([measured[(t.workers, t.threads)] for t in tuning.trials], tuning, warnings)


def loader_stage(config: RunConfig, path: str | None, parts: Callable[[], LoaderParts],
                 target_s: float, opts: SearchOptions, progress: Callable[[str], None],
                 clock: Callable[[], float] = time.perf_counter) -> LoaderChoice:
    """compare's step 2: the settings read from ``path``, or searched."""
    if path:
        return read_loader(path, config.to_dict(), target_s)
    p = parts()
    return search_loader(p.dataset, p.put, p.tokens_key, target_s, opts, progress=progress,
                         clock=clock)
