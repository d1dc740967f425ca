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


def test_an_installed_packages_file_is_named_by_its_package_wherever_it_is(tmp_path):
    venv = f"{tmp_path}/.venv/lib/python3.11/site-packages/flax/core/scope.py"
    assert short_path(venv, cwd=str(tmp_path)) == "flax/core/scope.py"
    assert short_location(f"{venv}:120", cwd="/elsewhere") == "flax/core/scope.py:120"
    assert short_path("/usr/lib/python3/dist-packages/numpy/__init__.py") == \
        "numpy/__init__.py"


def test_the_sync_table_names_library_files_by_module_and_shows_whole_lines(tmp_path):
    import dataclasses

    from pipecheck.report.monitor import format_monitor, site_owner
    from tests.page_records import monitor_record

    lib = f"{tmp_path}/venv/lib/python3.11/site-packages/optax/_src/base.py:7"
    assert site_owner(lib, False) == "library (optax._src.base)"
    assert site_owner(f"{tmp_path}/train.py:3", False) == "your code"
    assert site_owner("/usr/lib/python3/dist-packages/flax/__init__.py:1", False) == \
        "library (flax)"
    record = monitor_record()
    code = "metrics = {name: float(value) for name, value in jax.device_get(metrics).items()}"
    site = dataclasses.replace(record.sync_sites[0], location=lib, code=code, internal=False)
    text = format_monitor(dataclasses.replace(record, sync_sites=(site,)))
    (row,) = [line for line in text.splitlines() if "optax" in line]
    assert row.startswith("optax/_src/base.py:7 ") and code in row
    assert row.rstrip().endswith("library (optax._src.base)") and str(tmp_path) not in row
