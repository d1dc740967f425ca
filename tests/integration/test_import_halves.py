"""``pipecheck import`` of a log past ``HALVES_MIN_BYTES`` reads it in two halves at once,
the second in a forked child (``maxtext.parse_file``), in a fresh process as a user runs
it: the same record as the one-pass read of the same log gzipped (never cut), a fork
made, and a Ctrl-C while both halves are read (a handshake says they are) ends it with 130
and no child left."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import psutil
import pytest

from pipecheck.logs.maxtext import HALVES_MIN_BYTES
from tests.conftest import REPO
from tests.handshake import HANDSHAKE_FD, close_write_end, handshake_pipe, read_handshakes
from tests.maxtext_log import write_log

STEPS = 200_000
"""~42 MB: past HALVES_MIN_BYTES, ~0.5 s to read a half on the 2-core machine."""

COUNTED = """
import json, sys
from pipecheck.cli import main
from pipecheck.logs import forked
forks = []
run = forked.Child.run.__func__
def counted(cls, *a):
    child = run(cls, *a)
    forks.append(child.pid)
    return child
forked.Child.run = classmethod(counted)
code = main(sys.argv[1:])
print(json.dumps({"code": code, "forks": len(forks)}), file=sys.stderr)
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    log = tmp_path_factory.mktemp("halves") / "big.log"
    write_log(log, STEPS, seed=3)
    assert log.stat().st_size >= HALVES_MIN_BYTES
    return log


def _import(log: pathlib.Path, out: pathlib.Path) -> dict[str, int]:
    proc = subprocess.run([sys.executable, "-c", COUNTED, "import", str(log), "--json",
                           str(out), "--quiet"], capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_a_big_log_read_in_halves_gives_the_record_of_one_pass(big: pathlib.Path,
                                                               tmp_path: pathlib.Path) -> None:
    gz = tmp_path / "big.log.gz"
    with big.open("rb") as f, gzip.open(gz, "wb", compresslevel=1) as g:
        shutil.copyfileobj(f, g)
    halves, one_pass = _import(big, tmp_path / "halves.json"), _import(gz, tmp_path / "one.json")
    assert (halves, one_pass) == ({"code": 0, "forks": 1}, {"code": 0, "forks": 0})
    a = json.loads((tmp_path / "halves.json").read_text())
    b = json.loads((tmp_path / "one.json").read_text())
    assert (a.pop("source"), b.pop("source")) == (str(big), str(gz))
    assert a == b and len(a["anomalies"]) > 100


def test_ctrl_c_while_the_halves_are_read_exits_130_and_leaves_no_child(
        big: pathlib.Path) -> None:
    """Both halves' reads parked in the middle (tests/integration/parked_reads.py) until
    the Ctrl-C: it lands while both read, whatever the machine's speed."""
    handshakes, env = handshake_pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.parked_reads", "pipecheck", "import",
             str(big)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(_env(), **env), cwd=REPO, start_new_session=True,
            pass_fds=[int(env[HANDSHAKE_FD])])
        close_write_end(env)
        try:
            parked = read_handshakes(handshakes, 2, "both halves' reads under way")
            pids = {int(line.split()[1]) for line in parked}
            assert proc.pid in pids and len(pids) == 2, (parked, proc.pid)
            (child,) = pids - {proc.pid}
            assert child in {c.pid for c in psutil.Process(proc.pid).children()}
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 130, err
            assert err == "\npipecheck: interrupted\n" and out == ""
            assert not psutil.pid_exists(child)  # reaped by import itself before it exited
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    finally:
        os.close(handshakes)


def test_diff_of_two_big_logs_forks_once(big: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """B read beside A takes the second CPU: A is then read in one pass, not cut."""
    proc = subprocess.run([sys.executable, "-c", COUNTED, "diff", str(big), str(big),
                           "--quiet"], capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == {"code": 0, "forks": 1}
