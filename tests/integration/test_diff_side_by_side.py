"""pipecheck diff with B read in a second process (pipecheck/logs/side_by_side.py): the same
results and errors as one file after the other, no child left behind on an error, a
Ctrl-C or a killed parent, and nothing from the child on the terminal."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Iterator

import psutil
import pytest

from pipecheck.host_cpus import usable_cores
from pipecheck.logs.side_by_side import SIDE_BY_SIDE_MIN_BYTES
from tests.conftest import REPO, interruptible
from tests.handshake import HANDSHAKE_FD, close_write_end, handshake_pipe, read_handshakes
from tests.integration.test_long_runs_cli import run_on_terminal
from tests.maxtext_log import write_log_pair

REAL = REPO / "tests" / "data" / "real"
REAL_LOGS = sorted(REAL.glob("*.log"))

BIG_STEPS = 200_000
"""Steps of the logs a Ctrl-C lands in: ~42 MB each, past HALVES_MIN_BYTES (the reads are
parked in the middle for the Ctrl-C: tests/integration/parked_reads.py)."""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def driver(*args: str, timeout: float = 60) -> list[dict[str, Any]]:
    """tests/integration/side_by_side_driver.py's JSON lines."""
    proc = subprocess.run([sys.executable, "-m", "tests.integration.side_by_side_driver",
                           *args], capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    """Two 25,000-step logs (~5 MB each): past SIDE_BY_SIDE_MIN_BYTES as it is."""
    a, b = write_log_pair(tmp_path_factory.mktemp("side_by_side"), 25_000)
    assert min(a.stat().st_size, b.stat().st_size) >= SIDE_BY_SIDE_MIN_BYTES
    return a, b


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    return write_log_pair(tmp_path_factory.mktemp("side_by_side_big"), BIG_STEPS, "big_")


def test_real_logs_read_side_by_side_give_the_same_diff():
    """Every real log against the next one (and the last against the first), the threshold
    forced to 0: a fork for each pair, the same summaries, diff record and report."""
    pairs = [str(p) for a, b in zip(REAL_LOGS, REAL_LOGS[1:] + REAL_LOGS[:1], strict=True)
             for p in (a, b)]
    lines = driver("same", "0", *pairs)
    assert len(lines) == len(REAL_LOGS) >= 8
    for line in lines:
        assert line["forks"] == 1 and line["forks_sequential"] == 0, line
        assert line["summaries"] == [True, True] and line["diff"] and line["report"], line
        assert not line["jax"]


def test_generated_logs_read_side_by_side_give_the_same_diff(generated):
    """Logs past the production threshold, as it is (no forcing)."""
    (line,) = driver("same", str(SIDE_BY_SIDE_MIN_BYTES), *map(str, generated))
    assert line["forks"] == 1, line
    assert line["summaries"] == [True, True] and line["diff"] and line["report"], line


def _bad_inputs(d: pathlib.Path, a: pathlib.Path) -> dict[str, tuple[str, str]]:
    (d / "not_a_log.txt").write_text("hello, this is not a training log\n" * 1000)
    (d / "no_steps.log").write_text("I1122 completed step: x, seconds: y\n" * 1000)
    (d / "binary.log").write_bytes(b"\0\1\2" * 1000)
    data = gzip.compress(a.read_bytes())
    (d / "truncated.log.gz").write_bytes(data[: len(data) // 2])
    good = str(a)
    return {
        "B not a log": (good, str(d / "not_a_log.txt")),
        "B a log with no readable step": (good, str(d / "no_steps.log")),
        "B binary": (good, str(d / "binary.log")),
        "B a truncated gzip log": (good, str(d / "truncated.log.gz")),
        "A not a log, B fine": (str(d / "not_a_log.txt"), good),
        "A and B fine": (good, good),
    }


def test_errors_are_the_same_one_line_as_one_after_the_other(generated, tmp_path):
    """The threshold forced to 0 so every readable pair forks; each error is today's one
    line and exit code, no traceback, and the child is reaped."""
    cases = _bad_inputs(tmp_path, generated[0])
    for case, (a, b) in cases.items():
        (r,) = driver("cli", "none", a, b)
        side, seq = r["side"], r["sequential"]
        assert side == seq, case
        assert r["children_left"] == [] and r["forked_alive"] == [], case
        if case != "B binary":  # the probe cannot open it: read here, as before
            assert r["forks"] == 1, case
        if case == "A and B fine":
            assert side["code"] == 0 and "step time median" in side["stdout"], side
            continue
        assert side["code"] == 2 and side["raised"] is None, (case, side)
        assert side["stderr"].count("\n") == 1, (case, side["stderr"])
        assert side["stderr"].startswith("pipecheck: error: "), case
        assert "Traceback" not in side["stderr"], case


def test_an_unexpected_error_in_the_child_is_raised_here_and_the_child_reaped(generated):
    a, b = map(str, generated)
    (r,) = driver("cli", "value-error", a, b)
    raised = r["side"]["raised"]
    assert raised["type"] == "ValueError" and raised["message"] == "boom in B"
    assert "in a second process" in raised["notes"][0] and "_fault" in raised["notes"][0]
    assert r["forks"] == 1 and r["children_left"] == [] and r["forked_alive"] == []


def test_an_error_that_cannot_travel_comes_back_as_a_stand_in(generated):
    a, b = map(str, generated)
    (r,) = driver("cli", "unpicklable", a, b)
    raised = r["side"]["raised"]
    assert raised["type"] == "RuntimeError" and raised["message"] == "Unpicklable: cannot travel"
    assert r["children_left"] == [] and r["forked_alive"] == []

    (r,) = driver("cli", "unpicklable-pipecheck", a, b)
    side = r["side"]
    assert side["raised"] is None and side["code"] == 2
    assert side["stderr"] == "pipecheck: error: b.log: cannot be rebuilt\n"
    assert r["children_left"] == [] and r["forked_alive"] == []


def test_a_child_killed_before_its_result_is_one_line(generated):
    a, b = map(str, generated)
    (r,) = driver("cli", "killed", a, b)
    side = r["side"]
    assert side["raised"] is None and side["code"] == 1
    assert side["stderr"] == (f"pipecheck: error: reading {b} in a second process failed: "
                              "it was killed by SIGKILL without a result\n")
    assert r["children_left"] == [] and r["forked_alive"] == []


def _start(module: str, *args: str, readers: int = 2) -> tuple[subprocess.Popen[str], set[int]]:
    """``python -m MODULE ARGS`` in a new process group with Python's own Ctrl-C handler
    (``interruptible``), once ``readers`` of its processes said on the handshake pipe that
    their reads are under way (``MODULE`` writes ``WORD PID`` lines: parked_reads.py, the
    driver's ``slow``), and the pids of its children among them."""
    handshakes, env = handshake_pipe()
    try:
        proc = subprocess.Popen(interruptible(module, *args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=dict(_env(), PYTHONFAULTHANDLER="1", **env),
                                cwd=REPO, start_new_session=True,
                                pass_fds=[int(env[HANDSHAKE_FD])])
        close_write_end(env)
        try:
            lines = read_handshakes(handshakes, readers, f"{readers} reads under way")
        except AssertionError:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            raise
    finally:
        os.close(handshakes)
    pids = {int(line.split()[1]) for line in lines}
    assert proc.pid in pids and len(pids) == readers, (lines, proc.pid)
    children = pids - {proc.pid}
    assert children <= {c.pid for c in psutil.Process(proc.pid).children()}, lines
    return proc, children


def _ended(proc: subprocess.Popen[str], timeout_s: float = 60) -> tuple[str, str]:
    """``proc``'s stdout and stderr once it ended; not within ``timeout_s``, it is sent
    SIGABRT (faulthandler writes every thread's stack) and the test fails with them."""
    try:
        return proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"still running {timeout_s:g} s after the signal; its stacks:"
                             f"\n{err[-6000:]}") from None


@pytest.fixture
def group_cleanup() -> Iterator[list[int]]:
    """Process groups to SIGKILL after the test, so a failing one leaves nothing behind."""
    groups: list[int] = []
    yield groups
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _reaped(pid: int) -> bool:
    """No process ``pid`` at all: not running, and not a zombie waiting for a parent."""
    return not psutil.pid_exists(pid)


def _dead(pid: int, within: float) -> bool:
    """``pid`` ended (gone, or a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.01)
    return False


def test_ctrl_c_while_both_read_exits_130_and_leaves_no_child(big, group_cleanup):
    """``python -m pipecheck diff`` on 200k-step logs, every read parked in the middle
    (tests/integration/parked_reads.py) until the Ctrl-C: it lands while both read. (A
    machine of more than 2 CPUs also reads A in halves: a third reader.)"""
    proc, children = _start("tests.integration.parked_reads", "pipecheck", "diff",
                            *map(str, big), readers=2 if usable_cores() <= 2 else 3)
    group_cleanup.append(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = _ended(proc)
    assert proc.returncode == 130, err
    # click writes a newline first, as it always did on a Ctrl-C
    assert err == "\npipecheck: interrupted\n" and out == ""
    assert all(_reaped(child) for child in children)  # by diff itself, before it exited


def test_ctrl_c_in_a_slow_read_exits_130_and_leaves_no_child(generated, group_cleanup):
    """Both reads made 30 s long (the driver's ``slow``), the Ctrl-C sent once both said
    they are in them."""
    proc, (child,) = _start("tests.integration.side_by_side_driver", "cli", "slow",
                            *map(str, generated))
    group_cleanup.append(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = _ended(proc)
    assert proc.returncode == 0, err
    (r,) = [json.loads(line) for line in out.splitlines()]
    assert r["side"]["code"] == 130 and r["side"]["stderr"] == "\npipecheck: interrupted\n"
    assert r["children_left"] == [] and r["forked_alive"] == [] and _reaped(child)


def test_a_killed_parent_takes_its_child_with_it(generated, group_cleanup):
    """The child's read made 30 s long: it dies with its parent, not 30 s later. The
    parent is killed once both said they are in their reads (the child's death signal is
    set by then)."""
    proc, (child,) = _start("tests.integration.side_by_side_driver", "cli", "slow",
                            *map(str, generated))
    group_cleanup.append(proc.pid)
    proc.kill()
    proc.communicate(timeout=60)
    assert _dead(child, within=1)


def test_progress_comes_from_the_parent_only_and_piped_or_quiet_is_quiet(generated):
    """On a terminal: A's bar and the parent's bar for B, never the child's own bar for B
    (``reading b.log:``). Piped, or with --quiet: nothing on stderr. JAX never imported."""
    a, b = generated
    code, seen = run_on_terminal("diff", str(a), str(b), "--min-change", "1")  # B: +3.5%
    assert code == 0, seen
    assert "pipecheck: reading a.log:" in seen and "%|" in seen
    assert "pipecheck: reading b.log alongside, in a second process:" in seen
    assert "reading b.log:" not in seen
    assert "step time: B takes" in seen
    script = ("import sys\nfrom pipecheck.cli import main\n"
              f"code = main(['diff', {str(a)!r}, {str(b)!r}] + sys.argv[1:])\n"
              "print('jax imported:', 'jax' in sys.modules)\nsys.exit(code)\n")
    for extra in ([], ["--quiet"]):
        proc = subprocess.run([sys.executable, "-c", script, *extra], capture_output=True,
                              text=True, timeout=60, env=_env(), cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        assert proc.stdout.endswith("jax imported: False\n")
