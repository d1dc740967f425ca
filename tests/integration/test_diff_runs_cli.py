"""pipecheck diff of folders of real runs (several runs a side), via the CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from pipecheck.analysis.diff import MIN_CHANGE, run_median
from pipecheck.logs.runs import load_run
from tests.conftest import run_cli

RUNS_A, RUNS_B = 3, 2
"""Real calibrated runs per side: a folder of three against one of two."""

STEPS = "20"
"""Enough for the 10 steady steps each run needs, and quick."""


@pytest.fixture(scope="module")
def run_folders(tmp_path_factory):
    """(folder A, folder B): real `pipecheck synthetic` runs, compute_ms=20 on A's side and
    40 on B's."""
    root = tmp_path_factory.mktemp("runs")
    folders = []
    for side, count, compute_ms in (("A", RUNS_A, 20), ("B", RUNS_B, 40)):
        folder = root / side
        folder.mkdir()
        for i in range(1, count + 1):
            r = run_cli("synthetic", "--set", "workload=calibrated", "--set",
                        f"compute_ms={compute_ms}", "--steps", STEPS, "--quiet",
                        "--json", str(folder / f"run{i}.json"))
            assert r.returncode == 0, r.stderr
        folders.append(folder)
    return tuple(folders)


def test_diff_of_two_folders_tests_the_run_medians(run_folders, tmp_path):
    a, b = run_folders
    out = tmp_path / "diff.json"
    # another job's load during one run and not another is allowed: the test here is that
    # the folders are read and every run's median tested, not the machine's quiet
    r = run_cli("diff", str(a), str(b), "--allow", "machine-load", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    between = data["between_runs"]
    files_a, files_b = sorted(a.iterdir()), sorted(b.iterdir())
    assert between["sources_a"] == [str(p) for p in files_a]
    assert between["sources_b"] == [str(p) for p in files_b]
    assert between["runs_a"] == pytest.approx([run_median(load_run(p)) for p in files_a])
    assert between["runs_b"] == pytest.approx([run_median(load_run(p)) for p in files_b])
    assert between["spread_from"] == "A and B" and between["df"] > 0
    assert between["significance"] in ("significant", "not significant")
    assert data["min_change"] == 0.0
    assert f"over {RUNS_A} runs of A and {RUNS_B} of B" in r.stdout, r.stdout
    assert f"A: {RUNS_A} runs, the first {files_a[0]}" in r.stdout
    assert "each run's steady-state median" in r.stdout
    assert str(files_b[-1]) in r.stdout


def test_a_folder_against_one_run_file(run_folders):
    a, b = run_folders
    one = sorted(b.iterdir())[0]
    r = run_cli("diff", str(a), str(one), "--allow", "machine-load")
    assert r.returncode == 0, r.stderr
    assert "the between-run spread from A's 3 runs, taken for both" in r.stdout, r.stdout


def test_two_files_are_diffed_as_before(run_folders, tmp_path):
    a, b = run_folders
    out = tmp_path / "diff.json"
    r = run_cli("diff", str(sorted(a.iterdir())[0]), str(sorted(b.iterdir())[0]),
                "--allow", "machine-load", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["between_runs"] is None and data["min_change"] == MIN_CHANGE
    assert "runs of A" not in r.stdout and "each run's steady-state median" not in r.stdout


def test_an_empty_folder_is_one_line(run_folders, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "diff.json"
    r = run_cli("diff", str(empty), str(run_folders[1]), "--json", str(out))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "is a folder holding no run" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_a_folder_holding_a_file_that_is_not_a_run_is_one_line(run_folders, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(run_folders[1], mixed)
    (mixed / "notes.txt").write_text("the runs of Tuesday\n")
    out = tmp_path / "diff.json"
    r = run_cli("diff", str(run_folders[0]), str(mixed), "--json", str(out))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "notes.txt" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
