"""``pipecheck diff`` and ``pipecheck import``: two runs side by side; MaxText logs."""

from __future__ import annotations

import click

from pipecheck.analysis.comparable import ALLOWABLE_RULES, check_allow
from pipecheck.analysis.diff import MIN_CHANGE, diff_runs
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
from pipecheck.logs.side_by_side import load_runs
from pipecheck.records.codec import SERIAL
from pipecheck.report.diff import format_diff, format_imported


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("a", type=click.Path(exists=True, dir_okay=False))
@click.argument("b", type=click.Path(exists=True, dir_okay=False))
@click.option("--allow", "allow", multiple=True, metavar="RULE|KEY",
              help=f"a difference that is the change under test: a rule "
                   f"({', '.join(ALLOWABLE_RULES)}) or a config key; repeatable")
@click.option("--min-change", "min_change_pct", type=click.FloatRange(min=0, max=100),
              default=100 * MIN_CHANGE, show_default=True, metavar="PERCENT",
              help="the smallest change of the median step time called significant, in "
                   "percent of A's (two runs of one workload differ by a few percent)")
@output_options
@quiet_option
def diff(a: str, b: str, allow: tuple[str, ...], min_change_pct: float,
         json_path: str | None, force: bool, quiet: bool) -> None:
    """Compare run B with run A side by side.

    A and B are pipecheck result JSON files or MaxText training logs, in any mix, told
    apart by their content. Step times are compared over the steady state (no compile
    step, no anomalies): median, p90 and mean, with B-A, the relative change, and whether
    the median moved significantly (block-bootstrap interval of the median difference
    and Mann-Whitney U must both agree, and the change be at least --min-change).
    Anomalous steps are listed with a likely cause.
    Runs that differ in more than the change under test (batch size, model, devices,
    versions, loader setting, machine load, two config keys or more), or with too few
    steady steps, get the verdict "inconclusive" with each reason and what to do (exit 0).
    """
    check_outputs(force, json_path)
    progress = command_progress(quiet)
    encoder = ParallelEncoder()  # with --json, the columns are compressed while diff works
    ahead = encoder if json_path is not None else SERIAL
    run_a, run_b = load_runs(a, b, progress, encoder=ahead)
    check_allow(allow, run_a, run_b)
    result = diff_runs(run_a, run_b, progress=progress, encoder=ahead, allow=allow,
                       min_change=min_change_pct / 100)
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
