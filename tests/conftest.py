"""Shared fixtures. Unit tests (tests/unit) never touch wall time; integration tests
(tests/integration) run real JAX, Grain workers and the CLI in subprocesses."""

from __future__ import annotations

import compileall
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

_WITH_CTRL_C = """
import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def interruptible(module: str, *args: str) -> list[str]:
    """The command line of ``python -m MODULE ARGS`` with Python's own Ctrl-C handler, as
    a terminal start gets it (a shell running the tests in the background hands SIGINT
    down ignored, and a Ctrl-C test would prove nothing). Set in the new process itself:
    no ``preexec_fn``, which would run Python in a fork of the test process, whose JAX
    threads make that unsafe."""
    return [sys.executable, "-c", _WITH_CTRL_C, module, *args]


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment ``run_cli`` runs ``python -m pipecheck`` in, with ``env`` added."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("PIPECHECK_DATA_DIR", str(REPO / ".pytest_cache" / "pipecheck_data"))
    if env:
        full_env.update(env)
    return full_env


def run_cli(*args: str, timeout: float = 240, env: dict[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pipecheck ARGS`` in a fresh process (fresh JAX backend)."""
    return subprocess.run(
        [sys.executable, "-m", "pipecheck", *args],
        capture_output=True, text=True, timeout=timeout, env=cli_env(env), cwd=cwd or REPO,
    )


@pytest.fixture
def cli_run():
    return run_cli


def pytest_addoption(parser):
    parser.addoption(
        "--pin-workers", action="store_true",
        help="give each pytest-xdist worker its own equal share of the CPUs this run may use "
             "(the timing tests side by side, each on cores of its own)")


def _check_pinning(config) -> None:
    """``--pin-workers`` where it cannot give each worker a CPU of its own: refused, rather
    than running the timing tests side by side on shared CPUs."""
    workers = getattr(config.option, "numprocesses", None)
    if not hasattr(os, "sched_setaffinity"):
        raise pytest.UsageError("--pin-workers needs CPU affinity (Linux); run the timing "
                                "tests one at a time instead: -m timing without -n")
    if isinstance(workers, int) and workers > len(os.sched_getaffinity(0)):
        raise pytest.UsageError(f"--pin-workers with -n {workers} needs {workers} CPUs, and "
                                f"this run may use {len(os.sched_getaffinity(0))}; use "
                                "fewer workers")


def cpu_share(cpus: list[int], worker: int, workers: int) -> set[int]:
    """Worker ``worker``'s share of ``cpus`` among ``workers``: equal slices, one CPU each
    (taken in turn) where there are fewer CPUs than workers."""
    size = len(cpus) // workers
    if size == 0:
        return {cpus[worker % len(cpus)]}
    return set(cpus[worker * size:(worker + 1) * size])


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    pin = config.getoption("--pin-workers")
    if worker is None:
        if pin:
            _check_pinning(config)  # refused here, so a worker told to pin can
        # pipecheck's bytecode, written once for the run: every process a test starts (the
        # CLI, Grain workers, peers) imports pipecheck, and with PYTHONDONTWRITEBYTECODE set
        # (as on this project's machines) a fresh clone would compile it in each of them
        # (~0.25 CPU s a process)
        compileall.compile_dir(str(REPO / "pipecheck"), quiet=1)
    elif pin:
        # inherited by every process a test starts (the CLI, Grain workers, peers)
        workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
        os.sched_setaffinity(0, cpu_share(sorted(os.sched_getaffinity(0)), int(worker[2:]),
                                          workers))
