"""Paths as reports show them: relative under the working directory, pipecheck's own files
as pipecheck/..., anything else unchanged."""

from __future__ import annotations

import os

import pipecheck.measure.loop as loop_module
from pipecheck.records.common import Finding
from pipecheck.report.format import findings_text
from pipecheck.units import short_location, short_path


def test_a_file_under_the_working_directory_is_relative(tmp_path):
    assert short_path(str(tmp_path / "src" / "train.py"), cwd=str(tmp_path)) == \
        os.path.join("src", "train.py")


def test_pipecheck_own_files_show_as_pipecheck(tmp_path):
    assert short_path(loop_module.__file__, cwd=str(tmp_path)) == "pipecheck/measure/loop.py"


def test_a_file_elsewhere_is_unchanged(tmp_path):
    assert short_path("/somewhere/else/train.py", cwd=str(tmp_path)) == \
        "/somewhere/else/train.py"


def test_a_sibling_directory_with_the_same_prefix_is_not_under_cwd(tmp_path):
    (tmp_path / "proj").mkdir()
    assert short_path(str(tmp_path / "project2" / "a.py"), cwd=str(tmp_path / "proj")) == \
        str(tmp_path / "project2" / "a.py")


def test_locations_keep_their_line_and_pseudo_files_are_kept(tmp_path):
    assert short_location(f"{tmp_path}/train.py:88", cwd=str(tmp_path)) == "train.py:88"
    assert short_location("<stdin>:3", cwd=str(tmp_path)) == "<stdin>:3"
    assert short_location("MapMapDataset(transform=F)") == "MapMapDataset(transform=F)"


def test_findings_show_the_short_location(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = Finding("forced-sync", "m", location=f"{tmp_path}/train.py:88")
    assert findings_text([f]) == "- forced-sync [train.py:88]: m"
