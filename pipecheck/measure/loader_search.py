"""compare's loader stage: D(W) searched over worker counts, or read from a file.

The search measures one setting at a time (``dataloader.measure_setting``) and lets the
tuner (``tuner.tune_grain``) pick the next setting of Grain's four knobs; the measured peak
memory per worker caps it at ``--ram-budget-mb``. Either
way the result is the settings in the order tried, the chosen one, and the tuning outcome.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Mapping, Sequence

from pipecheck.analysis.loader.loader_model import same_to_model
from pipecheck.analysis.loader.model_tuner import trial_of, tune_by_model
from pipecheck.analysis.loader.tuner import (
    MIN_GAIN,
    UNKNOWN_SCALING,
    Trial,
    TuningOutcome,
    choice_note,
    choose,
    outcome,
    startup_note,
    tune,
    tune_grain,
)
from pipecheck.analysis.steady_state import buffered_at_start
from pipecheck.config import RunConfig
from pipecheck.data.grain_pipeline import (
    Asked,
    OwnSettings,
    read_elements_per_batch,
)
from pipecheck.data.per_setting import at_setting
from pipecheck.errors import ConfigError, PipelineExhaustedError, ResultFormatError
from pipecheck.host_cpus import usable_cores
from pipecheck.measure.dataloader import (
    BUFFER_WARNING_FACTOR,
    LoaderParts,
    measure_setting,
)
from pipecheck.measure.page_cache import CacheWatch
from pipecheck.measure.resources import default_ram_budget_mb
from pipecheck.progress import Progress
from pipecheck.records import store
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting
from pipecheck.records.env import input_warnings
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, GrainSettings
from pipecheck.units import ms
from pipecheck.workloads import kind_of

DEFAULT_BATCHES = 30
"""Batches timed per loader setting (more with many workers, see ``batches_for``)."""
DEFAULT_MAX_WORKERS = max(8, 2 * (os.cpu_count() or 1))
"""Above the core count on purpose: latency-bound pipelines keep gaining past the cores."""
SEARCHES = ("model", "joint")
"""How compare searches the loader settings: ``model``, the loader model picks each next
setting (``analysis.loader.model_tuner``, at most 4); ``joint``, the tuner's joint search over the
four knobs (``analysis.loader.tuner.tune_grain``). The first is the default."""

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


def batches_for(workers: int, batches: int,
                per_worker_buffer: int = DEFAULT_PER_WORKER_BUFFER, read_prefetch: int = 0,
                elements_per_batch: int = 1) -> int:
    """Batches to time for a setting: enough that the batches buffered while starting up
    (workers' output buffers and read prefetch, its elements counted in batches; served
    instantly) cannot pass for the steady state."""
    return max(batches, BUFFER_WARNING_FACTOR * buffered_at_start(
        workers, per_worker_buffer, read_prefetch, elements_per_batch))


def loader_trial(setting: LoaderSetting) -> Trial:
    """A measured setting as the tuner's Trial (``model_tuner.trial_of``: D as the verdict
    counts it, start-up, measured memory, why its reads wait on storage where they do)."""
    return trial_of(setting)


def best_setting(settings: Sequence[LoaderSetting], run_steps: int = 0,
                 target_s: float = 0.0) -> tuple[LoaderSetting, str]:
    """The measured setting to save, and why: the cheapest meeting ``target_s`` (with
    headroom), else the cheapest within the tuner's margin of the fastest; with
    ``run_steps``, start-up weighed against the run (``tuner.choose``)."""
    trials = [loader_trial(s) for s in settings]
    trial, ok = choose(trials, target_s, run_steps)
    chosen = settings[trials.index(trial)]
    if target_s > 0:
        why = choice_note(TuningOutcome(tuple(trials), trial, ok, UNKNOWN_SCALING, "fixed", ""))
    else:
        why = (f"chose the cheapest setting within {100 * MIN_GAIN:.0f}% of the fastest "
               f"(fewest workers, then the smallest buffers): {trial.settings.label()}")
    note = startup_note(trials, trial, target_s, run_steps)
    return chosen, f"{why}; {note}" if note else why


def _choice(settings: Sequence[LoaderSetting], tuning: TuningOutcome,
            warnings: Sequence[str]) -> LoaderChoice:
    by_key = {s.settings: s for s in settings}
    return LoaderChoice(tuple(settings), by_key[tuning.chosen.settings], tuning,
                        tuple(warnings))


def read_loader(path: str, config: Mapping[str, object], target_s: float,
                run_steps: int = 0) -> LoaderChoice:
    """The settings of a ``pipecheck dataloader --json`` file, and the choice among them."""
    result = store.load(path, expect=DataloaderResult)
    if not result.results:
        raise ResultFormatError(f"{path} holds no loader settings; re-run pipecheck dataloader "
                                "with --workers")
    settings = result.results
    tuning = outcome([loader_trial(s) for s in settings], target_s, usable_cores(), "from-file",
                     f"settings read from {path}", run_steps)
    return _choice(settings, tuning, input_warnings(path, result.env, result.config, config))


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
    search_threads: bool = True
    """Search the read threads too (False when --threads fixes them)."""
    fixed: GrainSettings | None = None
    """The whole setting fixed (a saved config's Grain settings)."""
    ram_budget_mb: float | None = None
    """The search stops before the measured memory would exceed it (None: half of the RAM
    available now)."""
    run_steps: int = 0
    """The user's run length: start-up is weighed against it (0: not weighed)."""
    max_workers_given: bool = False
    """--max-workers was given (a ceiling the user asked for, not the default)."""
    search: str = SEARCHES[0]
    """One of ``SEARCHES`` (``model`` runs in one process only: across hosts the joint
    search follows the slowest host)."""
    cold: bool = False
    """--cold: the data files are evicted from the page cache before each setting."""
    start: GrainSettings | None = None
    """The setting the workload's own config asks for (MaxText's Grain keys): measured first,
    as the run is loaded, when it is not the search's own first setting and no option or
    saved config fixes the setting (None: the search's first is the baseline)."""

    def asked(self) -> list[Asked]:
        """The Grain knobs the user set, and where: what a pipeline that fixes a knob
        itself must refuse rather than ignore."""
        asked = []
        if self.workers:
            asked.append(Asked("--workers", "workers", self.workers))
        if not self.search_threads:
            asked.append(Asked("--threads", "threads", (self.threads,)))
        if self.max_workers_given:
            asked.append(Asked("--max-workers", "max_workers", (self.max_workers,)))
        if self.fixed is not None:
            asked.append(Asked("the config's num_workers", "workers", (self.fixed.workers,)))
        return asked


def refuse_ignored(parts: LoaderParts, opts: SearchOptions) -> None:
    """A ConfigError when an option asks for a Grain setting the pipeline fixes itself
    (``OwnSettings.refuse``): run before any measurement."""
    if parts.dataset is not None:
        parts.own.refuse(opts.asked())
    if opts.cold:
        parts.refuse_cold()


def refuse_cold_for_real(parts: Callable[[], LoaderParts], real_from_file: bool) -> None:
    """--cold with the loader settings read from a file evicts before the real-data run
    alone: a ConfigError when that run is read from a file too (nothing reads the data), or
    when the data files cannot be evicted."""
    if real_from_file:
        raise ConfigError("--cold has nothing to evict for: the loader settings and the "
                          "real-data run are both read from files; drop --cold")
    parts().refuse_cold()


def _tuning(own: OwnSettings, read: GrainSettings,
            opts: SearchOptions, measure_settings: Callable[[GrainSettings], Trial],
            target_s: float, cores: int, max_workers: int, ram_budget: float,
            measure_loader: Callable[[GrainSettings], LoaderSetting] | None = None
            ) -> TuningOutcome:
    """The settings measured and the choice: the pipeline as it is (it runs its own
    workers), the settings fixed by the config or --workers, or a search of what pipecheck
    can set (every knob, or the workers and buffers where the read threads are fixed)."""

    def measure(w: int, t: int) -> float:
        return measure_settings(dataclasses.replace(read, workers=w, threads=t)).batch_s

    if own.workers is not None:  # nothing pipecheck can change
        reads = " and its read options" if own.read is not None else ""
        return outcome([measure_settings(read)], target_s, cores, "pipeline",
                       f"the pipeline fixes its own worker processes{reads}: measured as it "
                       "is, nothing searched", opts.run_steps)
    if opts.fixed is not None or opts.workers:
        fixed = [own.applied(opts.fixed)] if opts.fixed is not None else \
            [dataclasses.replace(read, workers=w) for w in opts.workers or ()]
        why = ("the Grain settings of the config" if opts.fixed is not None
               else "worker counts fixed by --workers")
        return outcome([measure_settings(g) for g in fixed], target_s, cores, "fixed", why,
                       opts.run_steps)
    if opts.search == "model" and opts.search_threads and own.read is None \
            and opts.agree is None and measure_loader is not None:
        return tune_by_model(measure_loader, target_s, max_workers=max_workers, cores=cores,
                             ram_budget_mb=ram_budget, run_steps=opts.run_steps)
    if opts.search_threads and own.read is None:
        return tune_grain(measure_settings, target_s, max_workers=max_workers,
                          cores=cores, ram_budget_mb=ram_budget, run_steps=opts.run_steps)
    # the read threads are fixed (--threads, or by the pipeline): search the workers
    return tune(measure, target_s, max_workers=max_workers, cores=cores,
                threads=read.threads, prefetch=read.prefetch, run_steps=opts.run_steps)


def _own_start(own: OwnSettings, read: GrainSettings, opts: SearchOptions
               ) -> GrainSettings | None:
    """The config's own setting to measure first (``SearchOptions.start``), as the pipeline
    runs it; None when there is none, when an option or saved config fixes the setting or
    the pipeline its workers, or when the model cannot tell it from the search's first."""
    if opts.start is None or own.workers is not None or opts.fixed is not None \
            or opts.workers or not opts.search_threads:
        return None
    start = own.applied(opts.start)
    return None if same_to_model(start, read) else start


def _measured_start(start: GrainSettings | None, measure: Callable[[GrainSettings], Trial],
                    progress: Progress) -> tuple[GrainSettings | None, str | None]:
    """The config's own setting measured first (``_own_start``), or None and why not: a
    data set too short for its buffers (MaxText's default read prefetch is 500 elements)
    leaves the search's first setting as the loading at first."""
    if start is None:
        return None, None
    progress.say(f"      first the config's own setting, as loaded: {start.label()}")
    try:
        measure(start)
    except PipelineExhaustedError as e:
        return None, (f"the config's own setting ({start.label()}) was not measured: {e}; "
                      "the search's first setting stands for the loading at first")
    return start, None


def search_loader(parts: LoaderParts, target_s: float, opts: SearchOptions, *,
                  progress: Progress, clock: Callable[[], float] = time.perf_counter
                  ) -> LoaderChoice:
    """Measure worker counts the tuner picks until one keeps up with ``target_s`` (every
    setting as it runs on the pipeline: what it fixes itself, ``parts.own``, kept)."""
    dataset = parts.dataset
    if dataset is None:
        raise ConfigError("this workload has no dataset; pipecheck compare needs "
                          "workload.dataset (or --dataloader FILE and --real FILE)")
    agree = opts.agree or (lambda value, how: value)
    measured: dict[GrainSettings, tuple[float, LoaderSetting]] = {}
    """Per setting, its fastest reading (D as agreed) and what was measured then."""
    cores = int(agree(usable_cores(), "min"))
    max_workers = int(agree(opts.max_workers, "min"))

    own = parts.own
    own.refuse(opts.asked())
    read = own.applied(GrainSettings(threads=opts.threads))

    def measure_settings(g: GrainSettings) -> Trial:
        g = own.applied(g)
        n = batches_for(g.workers, opts.batches, g.per_worker_buffer, g.prefetch,
                        read_elements_per_batch(at_setting(dataset, g)))
        progress.say(f"[2/4] loader: {g.label()}, {n} batches")
        s = measure_setting(dataset, g, n, put=parts.put, tokens_key=parts.tokens_key,
                            timeout_s=opts.timeout_s, clock=clock,
                            stage_wait_s=TUNING_STAGE_WAIT_S, own=own,
                            cache=CacheWatch(parts.files, opts.cold))
        here = loader_trial(s)
        # every host decides on the same numbers: the slowest host's (and its memory)
        t = dataclasses.replace(
            here, batch_s=agree(here.batch_s, "max"),
            first_batch_s=agree(here.first_batch_s, "max"),
            worker_rss_mb=agree(here.worker_rss_mb, "max"),
            main_rss_mb=agree(here.main_rss_mb, "max"))
        # a setting the tuner measures again keeps its faster reading, as the tuner does
        if s.settings not in measured or t.batch_s < measured[s.settings][0]:
            measured[s.settings] = (t.batch_s, s)
        slowest = "" if t.batch_s == here.batch_s or opts.agree is None else \
            f" here, {ms(t.batch_s)} on the slowest host"
        progress.say(f"      D = {ms(here.batch_s)} per batch{slowest}")
        return t

    def measure_loader(g: GrainSettings) -> LoaderSetting:
        """The setting as measured (the model is fitted to its resources)."""
        measure_settings(g)
        return measured[own.applied(g)][1]

    start, start_note = _measured_start(_own_start(own, read, opts), measure_settings,
                                        progress)
    ram_budget = agree(opts.ram_budget_mb or default_ram_budget_mb(), "min")
    tuning = _tuning(own, read, opts, measure_settings, target_s, cores, max_workers,
                     ram_budget, measure_loader)
    note = own.note()
    settings = [measured[k][1] for k in dict.fromkeys(
        [*([start] if start is not None else []), *(t.settings for t in tuning.trials)])]
    warnings = [*(n for n in (note, start_note) if n is not None),
                *cache_warnings_of(settings)]
    return _choice(settings, tuning, warnings)


def cache_warnings_of(settings: Sequence[LoaderSetting]) -> list[str]:
    """The settings' page-cache warnings (``analysis.loader.warm_cache``), each naming its
    setting: what compare's report lists of the loader."""
    return [f"{s.settings.short_label()}: {w}" for s in settings
            for w in (s.page_cache.warnings if s.page_cache is not None else ())]


def loader_stage(config: RunConfig, path: str | None, parts: Callable[[], LoaderParts],
                 target_s: float, opts: SearchOptions, progress: Progress,
                 clock: Callable[[], float] = time.perf_counter) -> LoaderChoice:
    """compare's step 2: the settings read from ``path``, or searched."""
    if path:
        return read_loader(path, config.to_dict(), target_s, opts.run_steps)
    p = parts()
    start = kind_of(config.workload).own_setting(config)  # measured first, as loaded
    return search_loader(p, target_s, dataclasses.replace(opts, start=start),
                         progress=progress, clock=clock)
