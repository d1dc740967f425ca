"""``pipecheck plot``: step times and a Gantt of a window of steps, as a PNG."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.option_specs import RenamedOption
from pipecheck.cli.options import quiet_option
from pipecheck.cli.progress import command_progress
from pipecheck.report.plot import plot_run


def _parse_window(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    first, sep, last = value.partition(":")
    try:
        a, b = int(first), int(last)
    except ValueError:
        a, b = -1, -1
    if not sep or a < 0 or b < a:
        raise click.BadParameter(f"expected FIRST:LAST step numbers (e.g. 10:21), got {value!r}",
                                 param_hint="'--window'")
    return a, b


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("run_json", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="PNG file to write (atomically).")
@click.option("--window", "window", metavar="FIRST:LAST", cls=RenamedOption, old=("--steps",),
              help="Steps shown in the Gantt (inclusive). Default: 12 steps around the first "
                   "checkpoint/eval/gc step.")
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
@quiet_option
def plot(run_json: str, output: str, window: str | None, force: bool, quiet: bool) -> None:
    """Plot a run JSON (synthetic, monitor, compare ...): the step-time series with tagged
    steps marked, and a Gantt of a window of steps. Needs matplotlib
    (pip install 'pipecheck[plot]'). See docs/timeline.md.
    """
    shown = plot_run(run_json, output, _parse_window(window), force, command_progress(quiet))
    if shown.ended_early:
        click.echo(shown.ended_early)
    if shown.window is not None:
        lower = f"Gantt of steps {shown.window[0]}-{shown.window[1]}"
    elif shown.lower == "anomalies":
        lower = "no spans in this run: the steps kept out of the steady state as a table"
    else:
        lower = "no spans and no steps kept out of the steady state: the series alone"
    band = "; steady state binned into a band" if shown.banded else ""
    click.echo(f"wrote {output} ({lower}{band})")
