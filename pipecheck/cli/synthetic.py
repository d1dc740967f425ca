"""``pipecheck synthetic``: the target step time."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.hosts import distributed_options, joined, report
from pipecheck.cli.options import (
    check_outputs,
    config_options,
    given_options,
    load_config,
    maxtext_options,
    output_options,
    quiet_option,
    wrote_trace,
)
from pipecheck.cli.progress import command_progress
from pipecheck.measure.distributed import DistributedOptions
from pipecheck.measure.synthetic import DEFAULT_STEPS, synthetic_run
from pipecheck.report.synthetic import format_synthetic
from pipecheck.report.trace import write_recorder_trace


@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@maxtext_options
@click.option("--steps", type=click.IntRange(min=3), default=DEFAULT_STEPS, show_default=True,
              help="Training steps to time, the first (compile) and the last (drain) step "
                   "included; at least 3.")
@output_options
@quiet_option
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON of the run (open in ui.perfetto.dev or "
                   "chrome://tracing; gzip when the name ends in .gz). See docs/timeline.md.")
@distributed_options
def synthetic(config_path: str | None, overrides: tuple[str, ...], steps: int,
              json_path: str | None, force: bool, quiet: bool, trace_path: str | None,
              dist: DistributedOptions) -> None:
    """Measure the target step time: train on one batch that already sits on the devices.

    Step time is the interval between consecutive host syncs on the *previous* step's
    loss, so asynchronous dispatch cannot hide compute. The first step and any step that
    compiled are reported apart from the steady state (median, p10, p90, IQR); every
    compilation of the train step after the first is explained.
    """
    cfg = load_config(config_path, overrides)
    check_outputs(force, json_path, trace_path)
    given = given_options()
    with joined(dist, "synthetic", cfg, {"steps": steps if given["steps"] else None}) as session:
        run = synthetic_run(cfg, steps, progress=command_progress(quiet))
    reported = report(session, dist, run.result, format_synthetic, json_path, force)
    if trace_path and reported is not None:
        write_recorder_trace(trace_path, run.recorder, run.compile_events,
                             "pipecheck synthetic", force, steps=run.result.steps)
        wrote_trace(trace_path)
