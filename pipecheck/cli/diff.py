"""``pipecheck diff`` and ``pipecheck import``: two runs side by side; MaxText logs."""

from __future__ import annotations

import click

from pipecheck.analysis.comparable import ALLOWABLE_RULES, check_allow
from pipecheck.analysis.diff import MIN_CHANGE, diff_sides
from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.options import (
    check_outputs,
    output_options,
    quiet_option,
    save_json,
)
from pipecheck.cli.progress import command_progress
from pipecheck.encoding import ParallelEncoder
from pipecheck.logs.maxtext import import_log
from pipecheck.logs.side_by_side import load_sides
from pipecheck.records.codec import SERIAL
from pipecheck.report.diff import format_diff, format_imported


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("a", type=click.Path(exists=True))
@click.argument("b", type=click.Path(exists=True))
@click.option("--allow", "allow", multiple=True, metavar="RULE|KEY",
              help=f"a difference that is the change under test: a rule "
                   f"({', '.join(ALLOWABLE_RULES)}) or a config key; repeatable")
@click.option("--min-change", "min_change_pct", type=click.FloatRange(min=0, max=100),
              default=None, metavar="PERCENT",
              help=f"the smallest change of the median step time called significant, in "
                   f"percent of A's [default: {100 * MIN_CHANGE:g} with one run a side (two "
                   "runs of one workload differ by a few percent); 0 with a folder of "
                   "several runs on a side (their spread is measured)]")
@output_options
@quiet_option
def diff(a: str, b: str, allow: tuple[str, ...], min_change_pct: float | None,
         json_path: str | None, force: bool, quiet: bool) -> None:
    """Compare run B with run A side by side.

    A and B are pipecheck result JSON files or MaxText training logs, in any mix, told
    apart by their content; or folders, each holding several runs of its side (every file
    in it a run, read in name order): the step-time verdict then tests the runs' medians
    against the between-run spread, and the other rows are each side's first run. Step
    times are compared over the steady state (no compile step, no anomalies): median, p90
    and mean, with B-A, the relative change, and whether the median moved significantly
    (block-bootstrap interval of the median difference and Mann-Whitney U must both
    agree, and the change be at least --min-change; with folders, Welch's t on the logs
    of the runs' medians).
    Anomalous steps are listed with a likely cause.
    Runs that differ in more than the change under test (batch size, model, devices,
    versions, loader setting, machine load, two config keys or more), or with too few
    steady steps, get the verdict "inconclusive" with each reason and what to do (exit 0).
    """
    check_outputs(force, json_path)
    progress = command_progress(quiet)
    encoder = ParallelEncoder()  # with --json, the columns are compressed while diff works
    ahead = encoder if json_path is not None else SERIAL
    side_a, side_b = load_sides(a, b, progress, encoder=ahead)
    check_allow(allow, side_a[0], side_b[0])
    result = diff_sides(side_a, side_b, progress=progress, encoder=ahead, allow=allow,
                        min_change=None if min_change_pct is None else min_change_pct / 100)
    click.echo(format_diff(result))
    save_json(result, json_path, force, encoder)


@cli.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@output_options
@quiet_option
def import_log_command(log: str, json_path: str | None, force: bool, quiet: bool) -> None:
    """Read a MaxText training log: steps, steady state, anomalies and their causes.

    Lines that matter (completed steps, parameters, versions, memory, checkpoint events,
    Total TFLOPs) are found even with glog headers and interleaved lines from other
    threads; all other lines are ignored. --json writes an "imported" record that
    'pipecheck diff' also accepts.
    """
    check_outputs(force, json_path)
    encoder = ParallelEncoder()  # with --json, the columns are compressed while it reads
    run = import_log(log, command_progress(quiet),
                     encoder=encoder if json_path is not None else SERIAL)
    click.echo(format_imported(run))
    save_json(run, json_path, force, encoder)
