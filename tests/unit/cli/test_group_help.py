"""``pipecheck --help``: its description lists every command the group has."""

from __future__ import annotations

import re

from pipecheck.cli import cli, main


def test_the_group_help_lists_every_registered_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    description = out.split("\nOptions:")[0]  # above click's own truncated command list
    listed = set(re.findall(r"^\s+pipecheck (\w+)", description, flags=re.M))
    assert listed == set(cli.commands), description
