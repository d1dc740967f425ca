"""``pipecheck compare``: target vs loader vs real-data training, and the verdict."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import click

from pipecheck import compare as compare_mod
from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.hosts import distributed_options, joined, report
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
from pipecheck.measure.loader_search import DEFAULT_BATCHES, DEFAULT_MAX_WORKERS
from pipecheck.measure.real_run import DEFAULT_STEPS, RealRun, real_stage
from pipecheck.measure.target import DEFAULT_TARGET_STEPS
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from pipecheck.report.compare import format_compare
from pipecheck.report.monitor import ended_early
from pipecheck.report.trace import write_recorder_trace
from pipecheck.workloads import maxtext, maxtext_model
from pipecheck.workloads.base import Workload


def _refuse_what_files_replace(given: Mapping[str, bool], synthetic_file: str | None,
                               dataloader_file: str | None, real_file: str | None) -> None:
    """An option given for a measurement that a file replaces is a usage error, not
    ignored (``given``: whether the command line gave each option)."""
    replaced = (("--workers", "workers_opt", dataloader_file),
                ("--max-workers", "max_workers", dataloader_file),
                ("--batches", "batches", dataloader_file),
                ("--threads", "threads", dataloader_file),
                ("--ram-budget-mb", "ram_budget_mb", dataloader_file),
                ("--target-steps", "target_steps", synthetic_file),
                ("--steps", "steps", real_file), ("--profile", "profile_dir", real_file))
    ignored = [opt for opt, name, source in replaced if given[name] and source]
    if ignored:
        raise click.UsageError(f"{', '.join(ignored)} cannot be used with the file that "
                               "replaces that measurement (--dataloader, --synthetic, --real)")
    if given["trace_path"] and real_file:
        raise click.UsageError("--trace needs pipecheck's own real-data run; a Monitor run "
                               "writes its trace with mon.write_trace(PATH)")


def _wrote_capture(profile_dir: str | None) -> None:
    if profile_dir:
        click.echo(f"captured 30 more real-data steps in {profile_dir} (read it with: "
                   f"pipecheck profile {profile_dir})")


# long: each option passed on once (the command's steps are helpers of this module)
@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@maxtext_options
@click.option("--steps", type=click.IntRange(min=5), default=DEFAULT_STEPS,
              show_default=True, help="Real-data training steps to time.")
@click.option("--target-steps", type=click.IntRange(min=5), default=DEFAULT_TARGET_STEPS,
              show_default=True, help="Synthetic steps for the target step time T.")
@click.option("--batches", type=click.IntRange(min=3), default=DEFAULT_BATCHES,
              show_default=True, help="Batches timed per loader setting, after the first.")
@click.option("--workers", "workers_opt", metavar="N[,N...]", default=None,
              callback=lambda ctx, param, value: None if value is None
              else int_list(ctx, param, value),
              help="Fix the Grain worker count, or give a list to choose from, instead of "
                   "searching.")
@click.option("--threads", type=click.IntRange(min=0), default=DEFAULT_THREADS,
              show_default=True,
              help="Grain read threads per worker (ReadOptions.num_threads); searched with the "
                   "workers unless given.")
@click.option("--max-workers", type=click.IntRange(min=1), default=DEFAULT_MAX_WORKERS,
              show_default="max(8, 2 x cores)",
              help="Ceiling of the worker search; above the core count by default because "
                   "latency-bound pipelines keep gaining past the cores.")
@click.option("--ram-budget-mb", "ram_budget_mb", type=click.FloatRange(min=1), default=None,
              metavar="MB", show_default="half of the available RAM",
              help="RAM the loader may use: the search measures each worker's peak memory "
                   "and stops before the budget.")
@click.option("--save-config", "save_config_path", type=click.Path(dir_okay=False),
              metavar="FILE",
              help="Write the config with the chosen Grain settings as YAML, for --config or "
                   "pipecheck.grain_options(FILE) in your own code.")
@click.option("--synthetic", "synthetic_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the target step time from this `pipecheck synthetic --json` file.")
@click.option("--dataloader", "dataloader_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the loader settings from this `pipecheck dataloader --json` file.")
@click.option("--real", "real_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the real-data step times and sync sites from a pipecheck.Monitor run "
                   "of your own loop (RUN.json).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=DEFAULT_TIMEOUT_S,
              metavar="SECONDS", show_default=True,
              help="Stop if the pipeline produces no batch for this many seconds (0: wait "
                   "forever).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON of the real-data run (open in "
                   "ui.perfetto.dev or chrome://tracing).")
@click.option("--profile", "profile_dir", type=click.Path(file_okay=False),
              help="After the real-data run, train 30 more steps captured with jax.profiler "
                   "into this folder (the measured steps are not profiled), for 'pipecheck "
                   "profile DIR', XProf or Perfetto (see docs/profile.md).")
@output_options
@quiet_option
@distributed_options
def compare(config_path: str | None, overrides: tuple[str, ...], steps: int,
            target_steps: int, batches: int, workers_opt: list[int] | None,
            threads: int, max_workers: int, ram_budget_mb: float | None,
            save_config_path: str | None, synthetic_file: str | None,
            dataloader_file: str | None, real_file: str | None, timeout_s: float,
            quiet: bool, trace_path: str | None, profile_dir: str | None,
            json_path: str | None, force: bool, dist: DistributedOptions) -> None:
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
    _refuse_what_files_replace(given, synthetic_file, dataloader_file, real_file)

    opts = compare_mod.CompareOptions(
        steps=steps, target_steps=target_steps, batches=batches,
        workers=tuple(workers_opt) if workers_opt else None, threads=threads,
        max_workers=max_workers, timeout_s=timeout_s, synthetic_file=synthetic_file,
        dataloader_file=dataloader_file, real_file=real_file,
        search_threads=not given["threads"], ram_budget_mb=ram_budget_mb,
        profile_dir=profile_dir, max_workers_given=given["max_workers"])
    fixed: dict[str, object] = {key: value if given[name] else None for key, name, value in (
        ("steps", "steps", steps), ("target_steps", "target_steps", target_steps),
        ("batches", "batches", batches), ("workers", "workers_opt", workers_opt),
        ("threads", "threads", threads), ("max_workers", "max_workers", max_workers),
        ("ram_budget_mb", "ram_budget_mb", ram_budget_mb))}
    fixed.update(synthetic=synthetic_file, dataloader=dataloader_file, real=real_file)
    with joined(dist, "compare", cfg, fixed) as session:
        if session is not None:
            opts = dataclasses.replace(opts, hosts=session)
        run = compare_mod.compare_run(cfg, opts, progress=command_progress(quiet),
                                      stages=_stages(cfg))
    if cfg.workload == maxtext.NAME:  # the recommendation as MaxText's overrides
        run = dataclasses.replace(run, result=dataclasses.replace(
            run.result, recommendation=maxtext.recommendation(run.result.recommendation,
                                                              run.result.tuning.chosen)))
    _say_if_ended_early(real_file, session)
    reported = report(session, dist, run.result, format_compare, json_path, force,
                      setting=run.result.tuning.chosen)
    chosen = run.result.tuning.chosen
    if save_config_path and reported is not None and chosen is not None:
        save_settings(save_config_path, cfg, chosen,
                      {"command": "compare", "loader_s": run.result.loader_step_s,
                       "target_s": run.result.target_step_s, "verdict": run.result.verdict},
                      force)
        label = maxtext.overrides_text(chosen) if cfg.workload == maxtext.NAME else \
            chosen.label()
        click.echo(f"wrote {save_config_path}: {label}")
    if trace_path and reported is not None and run.real.recorder is not None:
        write_recorder_trace(trace_path, run.real.recorder, run.real.compile_events,
                             process_name="pipecheck compare (real-data run)", force=force,
                             steps=run.result.steps)
        wrote_trace(trace_path)
    _wrote_capture(profile_dir if reported is not None else None)


def _stages(cfg: RunConfig) -> compare_mod.Stages:
    """compare's stages; for MaxText, R runs MaxText's own host work between steps (its
    metric logger, checkpoint and eval: ``maxtext_model.real_hooks``)."""
    if cfg.workload != maxtext.NAME:
        return compare_mod.Stages()

    def real(workload: Workload, *args: Any, **kwargs: Any) -> RealRun:
        hooks = maxtext_model.real_hooks(cfg, workload)
        return real_stage(dataclasses.replace(workload, hooks=(*workload.hooks, *hooks)),
                          *args, **kwargs)

    return compare_mod.Stages(real=real)


def _say_if_ended_early(real_file: str | None, session: Session | None) -> None:
    """A Monitor run that did not finish: say so first (at which step, and why)."""
    if not real_file or (session is not None and not session.is_reporter):
        return
    real = store.load(real_file, expect=MonitorResult)
    early = ended_early(real.incomplete, real.total_steps, real_file)
    if early:
        click.echo(early)
