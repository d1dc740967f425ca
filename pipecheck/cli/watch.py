"""``pipecheck watch RUN.json``: a running Monitor's record, live in the terminal."""

from __future__ import annotations

import sys

import click

from pipecheck.analysis.live import live_status
from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.logs.run_follow import follow
from pipecheck.records.monitor import MonitorResult
from pipecheck.report.watch import format_watch, format_watch_end

CLEAR = "\x1b[H\x1b[2J"
"""Clears a terminal before each frame (not written when the output is not a terminal)."""


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("run_json", type=click.Path(dir_okay=False))
@click.option("--every", default=2.0, show_default=True, type=click.FloatRange(min=0.05),
              help="Seconds between looks at the file.")
def watch(run_json: str, every: float) -> None:
    """Show a running Monitor's record (Monitor(save_to=RUN_JSON)) live: steps/s, the share
    of time waiting for input, stalls so far and the verdict so far; ends when the run ends
    (or on Ctrl-C) with a summary. See docs/monitor.md."""
    tty = sys.stdout.isatty()
    earlier: MonitorResult | None = None
    current: MonitorResult | None = None
    status = None
    interrupted = False
    try:
        for poll in follow(run_json, every):
            if poll.changed:
                earlier, current = current, poll.record
            status = live_status(poll.record, earlier)
            if status.state != "running":
                break
            if poll.changed or tty:
                frame = format_watch(run_json, status, poll.age_s)
                click.echo(CLEAR + frame if tty else frame + "\n")
    except KeyboardInterrupt:
        interrupted = True
    if status is not None:
        click.echo(format_watch_end(run_json, status, interrupted))
