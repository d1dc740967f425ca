"""``pipecheck report --help`` names every record kind the command renders."""

from __future__ import annotations

import re

from pipecheck.cli import main
from pipecheck.report.page import PAGES


def test_the_report_help_lists_every_kind_the_command_renders(capsys):
    assert main(["report", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # click wraps the text
    listed = re.search(r"of the kinds ([\w, ]+)\.", out)
    assert listed is not None, out
    assert set(listed[1].split(", ")) == set(PAGES)
    assert "profile" in listed[1].split(", ")
