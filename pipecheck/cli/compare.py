"""``pipecheck compare``: target vs loader vs real-data training, and the verdict."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import click

from pipecheck import compare as compare_mod
from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.hosts import distributed_options, joined, report
from pipecheck.cli.option_specs import OptionSpec, agreed_values, declare, refuse_replaced
from pipecheck.cli.options import (
    check_outputs,
    config_options,
    given_options,
    int_list,
    load_config,
    maxtext_options,
    output_options,
    quiet_option,
    save_settings,
    wrote_trace,
)
from pipecheck.cli.progress import command_progress
from pipecheck.config import RunConfig
from pipecheck.measure.dataloader import DEFAULT_THREADS, DEFAULT_TIMEOUT_S
from pipecheck.measure.distributed import DistributedOptions, Session
from pipecheck.measure.loader_search import DEFAULT_BATCHES, DEFAULT_MAX_WORKERS, SEARCHES
from pipecheck.measure.real_run import DEFAULT_STEPS
from pipecheck.measure.target import DEFAULT_TARGET_STEPS
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from pipecheck.report.compare import format_compare
from pipecheck.report.monitor import ended_early
from pipecheck.report.trace import write_recorder_trace
from pipecheck.workloads import kind_of


def _wrote_capture(profile_dir: str | None) -> None:
    if profile_dir:
        click.echo(f"captured 30 more real-data steps in {profile_dir} (read it with: "
                   f"pipecheck profile {profile_dir})")


def _workers(ctx: click.Context, param: click.Parameter,
             value: str | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(int_list(ctx, param, value))


COMPARE_OPTIONS = (
    OptionSpec("--steps", "steps", dict(
        type=click.IntRange(min=5), default=DEFAULT_STEPS, show_default=True,
        help="Real-data training steps to time."), replaced_by="real_file", agreed=True),
    OptionSpec("--target-steps", "target_steps", dict(
        type=click.IntRange(min=5), default=DEFAULT_TARGET_STEPS, show_default=True,
        help="Synthetic steps for the target step time T."),
        replaced_by="synthetic_file", agreed=True),
    OptionSpec("--batches", "batches", dict(
        type=click.IntRange(min=3), default=DEFAULT_BATCHES, show_default=True,
        help="Batches timed per loader setting, after the first."),
        replaced_by="dataloader_file", agreed=True),
    OptionSpec("--workers", "workers", dict(
        metavar="N[,N...]", default=None, callback=_workers,
        help="Fix the Grain worker count, or give a list to choose from, instead of "
             "searching."), replaced_by="dataloader_file", agreed=True),
    OptionSpec("--threads", "threads", dict(
        type=click.IntRange(min=0), default=DEFAULT_THREADS, show_default=True,
        help="Grain read threads per worker (ReadOptions.num_threads); searched with the "
             "workers unless given."), replaced_by="dataloader_file", agreed=True),
    OptionSpec("--max-workers", "max_workers", dict(
        type=click.IntRange(min=1), default=DEFAULT_MAX_WORKERS,
        show_default="max(8, 2 x cores)",
        help="Ceiling of the worker search; above the core count by default because "
             "latency-bound pipelines keep gaining past the cores."),
        replaced_by="dataloader_file", agreed=True),
    OptionSpec("--ram-budget-mb", "ram_budget_mb", dict(
        type=click.FloatRange(min=1), default=None, metavar="MB",
        show_default="half of the available RAM",
        help="RAM the loader may use: the search measures each worker's peak memory and "
             "stops before the budget."), replaced_by="dataloader_file", agreed=True),
    OptionSpec("--search", "search", dict(
        type=click.Choice(list(SEARCHES)), default=SEARCHES[0], show_default=True,
        help="How the loader settings are searched: the loader model picking each next "
             "setting, at most 4 (docs/whatif.md), or the joint search over the four knobs "
             "(docs/tuning.md)."), replaced_by="dataloader_file", agreed=True),
    OptionSpec("--cold", "cold", dict(
        is_flag=True,
        help="Evict the data files from the page cache (posix_fadvise DONTNEED) before each "
             "loader setting and the real-data run, so every read comes from storage; "
             "refused on FUSE and network file systems, where it cannot work (see "
             "docs/storage.md)."), agreed=True),
    OptionSpec("--measure-gain/--no-measure-gain", "measure_gain", dict(
        default=True, show_default=True,
        help="When the search chooses another setting than the first it measured, train at "
             "the first one too (half the steps), so what the chosen setting buys is "
             "measured, not modelled."), replaced_by="real_file", agreed=True),
    OptionSpec("--save-config", "save_config_path", dict(
        type=click.Path(dir_okay=False), metavar="FILE",
        help="Write the config with the chosen Grain settings as YAML, for --config or "
             "pipecheck.grain_options(FILE) in your own code.")),
    OptionSpec("--synthetic", "synthetic_file", dict(
        type=click.Path(exists=True, dir_okay=False),
        help="Take the target step time from this `pipecheck synthetic --json` file."),
        agreed=True),
    OptionSpec("--dataloader", "dataloader_file", dict(
        type=click.Path(exists=True, dir_okay=False),
        help="Take the loader settings from this `pipecheck dataloader --json` file."),
        agreed=True),
    OptionSpec("--real", "real_file", dict(
        type=click.Path(exists=True, dir_okay=False),
        help="Take the real-data step times and sync sites from a pipecheck.Monitor run of "
             "your own loop (RUN.json)."), agreed=True),
    OptionSpec("--timeout", "timeout_s", dict(
        type=click.FloatRange(min=0), default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
        show_default=True,
        help="Stop if the pipeline produces no batch for this many seconds (0: wait "
             "forever).")),
    OptionSpec("--trace", "trace_path", dict(
        type=click.Path(dir_okay=False),
        help="Write a Chrome trace event JSON of the real-data run (open in ui.perfetto.dev "
             "or chrome://tracing).")),
    OptionSpec("--profile", "profile_dir", dict(
        type=click.Path(file_okay=False),
        help="After the real-data run, train 30 more steps captured with jax.profiler into "
             "this folder (the measured steps are not profiled), for 'pipecheck profile "
             "DIR', XProf or Perfetto (see docs/profile.md)."), replaced_by="real_file"),
)
"""compare's own options, in --help's order. Each sets the ``CompareOptions`` field of its
name, except the outputs (OUTPUTS)."""

OUTPUTS = ("save_config_path", "trace_path")
"""The options of COMPARE_OPTIONS that name files compare writes, not what it measures."""


def _compare_options(given: Mapping[str, bool], values: Mapping[str, object]
                     ) -> compare_mod.CompareOptions:
    """What to measure, from the command line: each option's value as its field, the
    read threads searched unless --threads was given."""
    fields: dict[str, Any] = {s.name: values[s.name] for s in COMPARE_OPTIONS
                              if s.name not in OUTPUTS}
    return compare_mod.CompareOptions(**fields, search_threads=not given["threads"],
                                      max_workers_given=given["max_workers"])


@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@maxtext_options
@declare(COMPARE_OPTIONS)
@output_options
@quiet_option
@distributed_options
def compare(config_path: str | None, overrides: tuple[str, ...], save_config_path: str | None,
            trace_path: str | None, quiet: bool, json_path: str | None, force: bool,
            dist: DistributedOptions, **values: object) -> None:
    """Is the run input-bound, compute-bound, or held back by a forced host sync?

    Measures the target step time T (as `synthetic`), searches Grain's workers, read
    threads and buffers for the cheapest setting with a loader time D below T (as
    `dataloader`), trains on real data with the chosen setting
    (R, with a sampler locating the line that syncs), measures T again to catch machine
    drift, and gives the verdict with the evidence and a recommendation.
    """
    cfg = load_config(config_path, overrides)
    check_outputs(force, json_path, trace_path, save_config_path)
    given = given_options()
    refuse_replaced(COMPARE_OPTIONS, given, values)
    opts = _compare_options(given, values)
    if given["trace_path"] and opts.real_file:
        raise click.UsageError("--trace needs pipecheck's own real-data run; a Monitor run "
                               "writes its trace with mon.write_trace(PATH)")
    with joined(dist, "compare", cfg, agreed_values(COMPARE_OPTIONS, given, values)) as session:
        if session is not None:
            opts = dataclasses.replace(opts, hosts=session)
        run = compare_mod.compare_run(cfg, opts, progress=command_progress(quiet))
    _say_if_ended_early(opts.real_file, session)
    reported = report(session, dist, run.result, format_compare, json_path, force,
                      setting=run.result.tuning.chosen)
    if reported is not None:
        _write_outputs(cfg, run, save_config_path, trace_path, opts.profile_dir, force)


def _write_outputs(cfg: RunConfig, run: compare_mod.CompareRun, save_config_path: str | None,
                   trace_path: str | None, profile_dir: str | None, force: bool) -> None:
    """After the report: the saved config, the trace, and where the capture is."""
    chosen = run.result.tuning.chosen
    if save_config_path and chosen is not None:
        save_settings(save_config_path, cfg, chosen,
                      {"command": "compare", "loader_s": run.result.loader_step_s,
                       "target_s": run.result.target_step_s,
                       "real_s": run.result.real_step_s, "verdict": run.result.verdict},
                      force)
        click.echo(f"wrote {save_config_path}: {kind_of(cfg.workload).setting_text(chosen)}")
    if trace_path and run.real.recorder is not None:
        write_recorder_trace(trace_path, run.real.recorder, run.real.compile_events,
                             process_name="pipecheck compare (real-data run)", force=force,
                             steps=run.result.steps)
        wrote_trace(trace_path)
    _wrote_capture(profile_dir)


def _say_if_ended_early(real_file: str | None, session: Session | None) -> None:
    """A Monitor run that did not finish: say so first (at which step, and why)."""
    if not real_file or (session is not None and not session.is_reporter):
        return
    real = store.load(real_file, expect=MonitorResult)
    early = ended_early(real.incomplete, real.total_steps, real_file)
    if early:
        click.echo(early)
