"""``pipecheck report``: one self-contained HTML page for run records."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.report.page import write_report


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="HTML file to write (atomically).")
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def report(runs: tuple[str, ...], output: str, force: bool) -> None:
    """Write one self-contained HTML page (no network needed) for RUN.json [MORE.json ...]:
    any pipecheck record (compare, synthetic, dataloader, monitor, import, diff). The
    page says what the text report says, with charts of the steps, host time, spans,
    hosts and loader settings. See docs/report.md.
    """
    write_report(runs, output, force)
    click.echo(f"wrote {output}")
