"""``pipecheck dataloader``: the Grain input pipeline alone."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.hosts import distributed_options, joined, report
from pipecheck.cli.option_specs import RenamedOption
from pipecheck.cli.options import (
    check_outputs,
    config_options,
    load_config,
    maxtext_options,
    optional_int_list,
    output_options,
    quiet_option,
    save_settings,
    wrote_trace,
)
from pipecheck.cli.progress import command_progress
from pipecheck.measure.dataloader import (
    DEFAULT_BATCHES,
    DEFAULT_THREADS,
    DEFAULT_TIMEOUT_S,
    measure_dataloader,
)
from pipecheck.measure.distributed import DistributedOptions
from pipecheck.measure.loader_search import best_setting
from pipecheck.measure.resources import default_ram_budget_mb
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, GrainSettings
from pipecheck.report.dataloader import format_dataloader
from pipecheck.report.trace import dataloader_trace, write_trace
from pipecheck.workloads import kind_of


def _own_knobs(own: GrainSettings | None) -> dict[str, int]:
    """Each knob's value where neither an option nor a config key gives one: the setting the
    workload's own config asks for (MaxText's four Grain keys), else pipecheck's defaults
    (prefetch 0: twice the read threads, whichever are measured)."""
    if own is None:
        return {"workers": 0, "per_worker_buffer": DEFAULT_PER_WORKER_BUFFER,
                "threads": DEFAULT_THREADS, "prefetch": 0}
    return {"workers": own.workers, "per_worker_buffer": own.per_worker_buffer,
            "threads": own.threads, "prefetch": own.prefetch}


@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@maxtext_options
@click.option("--workers", default=None, callback=optional_int_list, metavar="N[,N...]",
              help="Grain worker processes (mp_prefetch); a comma-separated list sweeps them, "
                   "e.g. --workers 0,1,2,4. 0 loads in the main process, as a training loop "
                   "without workers does.", show_default="the config's num_workers, else 0")
@click.option("--threads", default=None, callback=optional_int_list, metavar="N[,N...]",
              help="Read threads per process (ReadOptions.num_threads); a list sweeps them.",
              show_default=f"the config's num_threads, else {DEFAULT_THREADS}")
@click.option("--per-worker-buffer-size", "buffers", default=None, callback=optional_int_list,
              metavar="N[,N...]",
              help="Batches each worker may hold ready "
                   "(MultiprocessingOptions.per_worker_buffer_size); a list sweeps them.",
              show_default=f"the config's, else {DEFAULT_PER_WORKER_BUFFER}")
@click.option("--prefetch-buffer-size", "prefetch", default=None, callback=optional_int_list,
              metavar="N[,N...]",
              help="Elements the read threads prefetch (ReadOptions.prefetch_buffer_size); a "
                   "list sweeps them.", show_default="the config's, else 2 x threads")
@click.option("--batches", type=click.IntRange(min=1), default=DEFAULT_BATCHES, show_default=True,
              help="Batches to time after the first (the first batch is reported apart).")
@click.option("--no-device-put", "no_device_put", is_flag=True,
              help="Do not move each batch to the devices (by default it is put with the "
                   "workload's sharding, as training does: that host work is loading cost).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=DEFAULT_TIMEOUT_S,
              show_default=True, metavar="SECONDS",
              help="Stop with an error when the pipeline produces no batch for this long "
                   "(0: wait forever).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON: one track per setting, one slice per "
                   "batch (open in ui.perfetto.dev or chrome://tracing).")
@click.option("--ram-budget-mb", "ram_budget_mb", type=click.FloatRange(min=1), default=None,
              metavar="MB",
              help="RAM the loader may use: settings whose measured peak memory (training "
                   "process + workers) leaves no room for another worker are reported "
                   "memory-bound.", show_default="half of the available RAM")
@click.option("--run-steps", "run_steps", type=click.IntRange(min=1), default=None,
              cls=RenamedOption, old=("--steps",),
              help="Length of your training run, in steps, for --save-config: a setting whose "
                   "start-up costs more than it saves over the run is not chosen.",
              show_default="the config's run_steps; 0: start-up not weighed")
@click.option("--cold", is_flag=True,
              help="Evict the data files from the page cache (posix_fadvise DONTNEED) before "
                   "each setting, so every read comes from storage; refused on FUSE and "
                   "network file systems, where it cannot work (see docs/storage.md).")
@click.option("--save-config", "save_config_path", type=click.Path(dir_okay=False),
              metavar="FILE",
              help="Write the config with the best setting measured (the cheapest within 10% "
                   "of the fastest) as YAML, for --config or pipecheck.grain_options(FILE).")
@output_options
@quiet_option
@distributed_options
def dataloader(config_path: str | None, overrides: tuple[str, ...], workers: list[int] | None,
               threads: list[int] | None, buffers: list[int] | None, prefetch: list[int] | None,
               batches: int, no_device_put: bool, timeout_s: float, trace_path: str | None,
               ram_budget_mb: float | None, run_steps: int | None, cold: bool,
               save_config_path: str | None, json_path: str | None, force: bool,
               quiet: bool, dist: DistributedOptions) -> None:
    """Time the Grain input pipeline alone, per worker count (and read-thread count).

    For each setting: the first batch (iterator creation, worker spawn) apart; then the
    median, p90 and p99 of the per-batch times, batches/s, examples/s and tokens/s without
    the first batch; and Grain's per-stage breakdown, naming the stage the pipeline waits on.
    """

    cfg = load_config(config_path, overrides)
    check_outputs(force, json_path, trace_path, save_config_path)

    asked_by: dict[str, str] = {}  # per knob, the option or config key that set it

    def knob(given: list[int] | None, field: str, option: str, key: str,
             default: int) -> list[int]:
        if given:
            asked_by[field] = option
        elif cfg.get(key) is not None:
            asked_by[field] = f"the config's {key}"
        return given or [cfg[key] if cfg.get(key) is not None else default]

    own = _own_knobs(kind_of(cfg.workload).own_setting(cfg))
    knobs = {"workers": knob(workers, "workers", "--workers", "num_workers", own["workers"]),
             "threads": knob(threads, "threads", "--threads", "num_threads", own["threads"]),
             "buffers": knob(buffers, "per_worker_buffer", "--per-worker-buffer-size",
                             "per_worker_buffer_size", own["per_worker_buffer"]),
             "prefetch": knob(prefetch, "prefetch", "--prefetch-buffer-size",
                              "prefetch_buffer_size", own["prefetch"])}
    options = {**knobs, "batches": batches, "no_device_put": no_device_put, "cold": cold}
    try:
        with joined(dist, "dataloader", cfg, options) as session:
            result = measure_dataloader(
                cfg, knobs["workers"], knobs["threads"], batches, buffers=knobs["buffers"],
                prefetch=knobs["prefetch"],
                ram_budget_mb=ram_budget_mb or default_ram_budget_mb(),
                device_put=not no_device_put, timeout_s=timeout_s or None,
                progress=command_progress(quiet), asked_by=asked_by, cold=cold,
            )
    except KeyboardInterrupt:
        raise click.exceptions.Abort() from None  # main() prints the one-line message
    reported = report(session, dist, result, format_dataloader, json_path, force)
    if save_config_path and reported is not None:
        chosen, why = best_setting(reported.results, run_steps or cfg["run_steps"])
        save_settings(save_config_path, cfg, chosen.settings,
                      {"command": "dataloader",
                       "loader_s": chosen.loader_time.value if chosen.loader_time else None,
                       "first_batch_s": chosen.first_batch_s}, force)
        click.echo(f"\nwrote {save_config_path}: {why}")
    if trace_path and reported is not None:
        write_trace(trace_path, dataloader_trace(reported), force)
        wrote_trace(trace_path)
