"""Every output path is checked before any measurement: one line, exit 2, nothing written.

In-process (``main(argv)``): a measurement would take seconds and print its report; these
return before JAX is imported, so a check that ran after the measurement would fail them.
"""

from __future__ import annotations

import pytest

from pipecheck.cli import main


@pytest.fixture
def blocker(tmp_path):
    """A regular file standing where a directory should be (``file/x.json``): as root,
    permission bits do not stop writes, a file in the way does."""
    f = tmp_path / "file"
    f.write_text("not a directory")
    return f


@pytest.mark.parametrize("argv", [
    ["synthetic", "--json", "{bad}"],
    ["synthetic", "--trace", "{bad}"],
    ["dataloader", "--json", "{bad}"],
    ["dataloader", "--trace", "{bad}"],
    ["compare", "--json", "{bad}"],
    ["compare", "--trace", "{bad}"],
    ["dataloader", "--save-config", "{bad}"],
    ["compare", "--save-config", "{bad}"],
])
def test_output_under_a_file_is_refused_before_measuring(capsys, blocker, argv):
    bad = str(blocker / "x.json")
    code = main([a.replace("{bad}", bad) for a in argv])
    err = capsys.readouterr()
    assert code == 2
    lines = err.err.strip().splitlines()
    assert lines == [f"pipecheck: error: cannot write {bad}: {blocker} is a file, not a "
                     "directory; choose another path"]
    assert err.out == ""  # no report: nothing was measured


def test_plot_output_under_a_file_is_refused(capsys, blocker, tmp_path):
    run = tmp_path / "run.json"
    run.write_text("{}")
    bad = str(blocker / "x.png")
    assert main(["plot", str(run), "-o", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"pipecheck: error: cannot write {bad}: {blocker} is a file, not a "
                   "directory; choose another path")


def test_output_that_is_a_directory_is_refused(capsys, tmp_path):
    assert main(["synthetic", "--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pipecheck: error: ") and "\n" not in err  # click's own check
    assert f"'{tmp_path}' is a directory" in err
