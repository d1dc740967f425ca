"""Long runs through the CLI: generated MaxText logs in the real line format, progress bars
on a terminal and nothing when piped (import, diff, plot), plots that read at any length."""

from __future__ import annotations

import fcntl
import os
import pathlib
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from pipecheck.records import store
from pipecheck.records.imported import ImportedRun
from pipecheck.records.steps import StepTable
from tests.conftest import REPO, run_cli
from tests.maxtext_log import write_log_pair

STEPS = 30000


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    return write_log_pair(tmp_path_factory.mktemp("long"), STEPS)


def run_on_terminal(*args: str, timeout: float = 240) -> tuple[int, str]:
    """``python -m pipecheck ARGS`` with stdout and stderr on a pseudo-terminal, as a user
    at a terminal runs it; returns (exit code, everything the terminal received)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    master, slave = pty.openpty()
    # a new pseudo-terminal is 0 columns wide, and tqdm draws nothing in no width
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "pipecheck", *args], stdin=slave,
                            stdout=slave, stderr=slave, env=env, cwd=REPO, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            pytest.fail(f"pipecheck {' '.join(args)} did not finish in {timeout} s")
        return proc.wait(timeout=30), out.decode(errors="replace")
    finally:
        os.close(master)


def test_import_shows_progress_on_a_terminal_and_nothing_when_piped(logs, tmp_path):
    a, _ = logs
    code, seen = run_on_terminal("import", str(a))
    assert code == 0, seen
    assert "pipecheck: reading a.log" in seen and "%|" in seen  # a tqdm bar was drawn
    assert "steady-state steps (n)" in seen
    piped = run_cli("import", str(a), "--json", str(tmp_path / "a.json"))
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert "pipecheck: reading" not in piped.stdout and "%|" not in piped.stdout
    run = store.load(tmp_path / "a.json", expect=ImportedRun)
    assert isinstance(run.steps, StepTable) and len(run.steps) == STEPS


def test_diff_shows_bootstrap_progress_on_a_terminal_and_nothing_when_piped(logs):
    a, b = logs
    code, seen = run_on_terminal("diff", str(a), str(b), "--min-change", "1")  # B: +3.5%
    assert code == 0, seen
    assert "pipecheck: bootstrapping step time median" in seen and "%|" in seen
    assert "step time: B takes" in seen
    piped = run_cli("diff", str(a), str(b))
    assert piped.returncode == 0 and piped.stderr == ""
    assert "bootstrapping" not in piped.stdout
    assert "significant" in piped.stdout


def test_plot_of_a_long_import_bands_the_steady_state_and_tables_the_anomalies(logs, tmp_path):
    a, _ = logs
    rec = tmp_path / "a.json"
    assert run_cli("import", str(a), "--json", str(rec)).returncode == 0
    out = tmp_path / "a.png"
    r = run_cli("plot", str(rec), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and "%|" not in r.stdout  # piped: no bar
    assert "no spans in this run: the steps kept out of the steady state as a table" in r.stdout
    assert "steady state binned into a band" in r.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_shows_progress_on_a_terminal(logs, tmp_path):
    a, _ = logs
    rec = tmp_path / "a.json"
    assert run_cli("import", str(a), "--json", str(rec)).returncode == 0
    code, seen = run_on_terminal("plot", str(rec), "-o", str(tmp_path / "a.png"))
    assert code == 0, seen
    assert "pipecheck: plotting a.json" in seen and "/3 [" in seen  # a tqdm bar of stages
    assert "wrote " in seen
