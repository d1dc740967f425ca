"""The measuring commands' ``--help``, byte for byte as checked in (tests/unit/cli/help/):
their options are declared from tables (cli/compare.py's COMPARE_OPTIONS), and the help a
user reads must not move when the declarations do. After a deliberate change of an option,
write the files again with ``python tests/unit/cli/test_command_help.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pipecheck.cli import cli

HELP_DIR = Path(__file__).parent / "help"
COMMANDS = ("compare", "dataloader", "synthetic")
WIDTH = 80
"""The terminal width the help is wrapped to (pinned: click reads the terminal's)."""


def help_text(command: str) -> str:
    result = CliRunner().invoke(cli, [command, "--help"], prog_name="pipecheck",
                                terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_as_checked_in(command):
    assert help_text(command) == (HELP_DIR / f"{command}.txt").read_text()


if __name__ == "__main__":  # the expected help, after a deliberate change of an option
    for name in COMMANDS:
        (HELP_DIR / f"{name}.txt").write_text(help_text(name))
