"""``pipecheck dataloader``: the Grain input pipeline alone."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.hosts import distributed_options, joined, report
from pipecheck.cli.options import (
    check_outputs,
    config_options,
    int_list,
    load_config,
    output_options,
    wrote_trace,
)
from pipecheck.measure.distributed import DistributedOptions


@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@click.option("--workers", default="0", show_default=True, callback=int_list,
              metavar="N[,N...]",
              help="Grain worker processes (mp_prefetch); a comma-separated list sweeps them, "
                   "e.g. --workers 0,1,2,4. 0 loads in the main process, as a training loop "
                   "without workers does.")
@click.option("--threads", default="1", show_default=True, callback=int_list,
              metavar="N[,N...]",
              help="Read threads per process (ReadOptions.num_threads); a list sweeps them.")
@click.option("--batches", type=click.IntRange(min=1), default=50, show_default=True,
              help="Batches to time after the first (the first batch is reported apart).")
@click.option("--no-device-put", "no_device_put", is_flag=True,
              help="Do not move each batch to the devices (by default it is put with the "
                   "workload's sharding, as training does: that host work is loading cost).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=120.0,
              show_default=True, metavar="SECONDS",
              help="Stop with an error when the pipeline produces no batch for this long "
                   "(0: wait forever).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON: one track per setting, one slice per "
                   "batch (open in ui.perfetto.dev or chrome://tracing).")
@output_options
@distributed_options
def dataloader(config_path: str | None, overrides: tuple[str, ...], workers: list[int],
               threads: list[int], batches: int, no_device_put: bool, timeout_s: float,
               trace_path: str | None, json_path: str | None, force: bool,
               dist: DistributedOptions) -> None:
    """Time the Grain input pipeline alone, per worker count (and read-thread count).

    For each setting: the first batch (iterator creation, worker spawn) apart; then the
    median, p90 and p99 of the per-batch times, batches/s, examples/s and tokens/s without
    the first batch; and Grain's per-stage breakdown, naming the stage the pipeline waits on.
    """

    from pipecheck.measure.dataloader import measure_dataloader
    from pipecheck.report.dataloader import format_dataloader

    cfg = load_config(config_path, overrides)
    check_outputs(force, json_path, trace_path)
    options = {"workers": workers, "threads": threads, "batches": batches,
               "no_device_put": no_device_put}
    try:
        with joined(dist, "dataloader", cfg, options) as session:
            result = measure_dataloader(
                cfg, workers, threads, batches, device_put=not no_device_put,
                timeout_s=timeout_s or None,
                progress=lambda line: click.echo(f"pipecheck: {line}", err=True),
            )
    except KeyboardInterrupt:
        raise click.exceptions.Abort() from None  # main() prints the one-line message
    reported = report(session, dist, result, format_dataloader, json_path, force)
    if trace_path and reported is not None:
        from pipecheck.report.trace import dataloader_trace, write_trace

        write_trace(trace_path, dataloader_trace(reported), force)
        wrote_trace(trace_path)
