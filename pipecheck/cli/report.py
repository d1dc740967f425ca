"""``pipecheck report``: one self-contained HTML page for run records."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.report.page import PAGES, write_report


def report_help() -> str:
    """The command's help, naming every record kind it renders (those with a page in
    ``report.page.PAGES``), so a kind given a page is listed without another edit."""
    return ("Write one self-contained HTML page (no network needed) for RUN.json "
            "[MORE.json ...]: any pipecheck record, of the kinds "
            f"{', '.join(sorted(PAGES))}. The page says what the text report says, with "
            "charts of the steps, host time, spans, hosts, loader settings and, for a "
            "profile, the device's time per step. See docs/report.md.")


@cli.command(context_settings=CONTEXT_SETTINGS, help=report_help())
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="HTML file to write (atomically).")
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def report(runs: tuple[str, ...], output: str, force: bool) -> None:
    write_report(runs, output, force)
    click.echo(f"wrote {output}")
