"""The ``pipecheck`` command: parse, build a config, call the core, print a report.

Each command lives in its own module and is thin: parse, build a config, call the core,
hand the result to a pure reporter. Only this package prints. Every ``PipecheckError`` and
every click usage error becomes one line on stderr and a non-zero exit code, in ``main``.
"""

from __future__ import annotations

import multiprocessing.util
import os
import sys
import threading
import traceback
from typing import Sequence

import click

# Importing the command modules adds their commands to the group.
from pipecheck.cli import (  # noqa: F401
    compare,
    dataloader,
    diff,
    plot,
    profile,
    report,
    synthetic,
    watch,
    whatif,
)
from pipecheck.cli.group import cli
from pipecheck.cli.hosts import ACTIVE
from pipecheck.errors import PipecheckError, one_line
from pipecheck.measure.distributed import hard_exit, release_children

EXIT_INTERRUPTED = 130

__all__ = ["cli", "main", "run"]


def _exit_past_stuck_threads(code: int) -> None:
    """After a stall, a transform stuck in a read thread would hold the interpreter's exit
    forever (it joins such threads): run multiprocessing's exit clean-up and leave now."""
    stuck = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not stuck:
        return
    multiprocessing.util._exit_function()  # type: ignore[attr-defined]
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


TRACEBACK_FLAG = "--traceback"


def split_traceback_flag(args: Sequence[str]) -> tuple[list[str], bool]:
    """Take ``--traceback`` out of the arguments wherever it stands (before a ``--``), so
    every command accepts it without declaring it."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    found = TRACEBACK_FLAG in args[:end]
    return [a for i, a in enumerate(args) if i >= end or a != TRACEBACK_FLAG], found


def print_stack(e: BaseException) -> None:
    """The full stack behind an error: the original exception's, when the error was made
    from one (``details``), else the error's own."""
    details = getattr(e, "details", None)
    click.echo(details or "".join(traceback.format_exception(e)), err=True, nl=False)


def _leave_multihost_run(code: int) -> None:
    """After an error in a multi-process run, leave at once: JAX's shutdown at exit waits
    for every peer (some may be gone or still measuring) and then aborts with a C++ stack."""
    if ACTIVE:
        release_children()  # before saying so: a peer may end the run once it is said
        ACTIVE[-1].leave()
        hard_exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code instead of raising."""
    args, show_stack = split_traceback_flag(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=args, prog_name="pipecheck", standalone_mode=False)
    except PipecheckError as e:
        if show_stack:
            print_stack(e)
        click.echo(f"pipecheck: error: {one_line(e)}", err=True)
        _leave_multihost_run(e.exit_code)
        if e.exit_at_once:
            _exit_past_stuck_threads(e.exit_code)
        return e.exit_code
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else str(e))
        return 0
    except click.UsageError as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
        click.echo(f"pipecheck: error: {one_line(e.format_message())}{hint}", err=True)
        return e.exit_code
    except click.ClickException as e:
        click.echo(f"pipecheck: error: {one_line(e.format_message())}", err=True)
        return e.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("pipecheck: interrupted", err=True)
        _leave_multihost_run(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as e:
        return e.exit_code
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
