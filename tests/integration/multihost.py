"""Launching N local processes of one multi-process run, each with a timeout, and making
sure none of them (nor any Grain worker they started) is left running."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time
import uuid
from typing import Iterator, Sequence

import psutil

from tests.conftest import REPO

TAG = "PIPECHECK_MULTIHOST_TEST"


def free_port() -> int:
    """A port nothing listens on now (chosen at run time, so parallel runs do not clash)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tagged(tag: str) -> list[psutil.Process]:
    """Live processes started by one launch (they inherit its tag in their environment)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG) == tag and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


class Launch:
    """N processes of one run: ``argv_for(i)`` is process i's command line."""

    def __init__(self, tmp: pathlib.Path, commands: Sequence[Sequence[str]],
                 cwd: pathlib.Path | None = None) -> None:
        self.tmp, self.tag = tmp, uuid.uuid4().hex
        env = dict(os.environ, PYTHONPATH=str(REPO), **{TAG: self.tag})
        env.setdefault("PIPECHECK_DATA_DIR", str(REPO / ".pytest_cache" / "pipecheck_data"))
        self.procs: list[subprocess.Popen[str] | None] = []
        self.out: list[pathlib.Path] = []
        self.err: list[pathlib.Path] = []
        for i, argv in enumerate(commands):
            if argv is None:
                self.procs.append(None)
                continue
            out, err = tmp / f"stdout.{i}", tmp / f"stderr.{i}"
            self.out.append(out)
            self.err.append(err)
            self.procs.append(subprocess.Popen(
                list(argv), stdout=out.open("w"), stderr=err.open("w"), text=True, env=env,
                cwd=cwd or tmp))

    def wait(self, timeout: float) -> list[int | None]:
        deadline = time.monotonic() + timeout
        codes: list[int | None] = []
        for p in self.procs:
            if p is None:
                codes.append(None)
                continue
            try:
                codes.append(p.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def stdout(self, i: int) -> str:
        return (self.tmp / f"stdout.{i}").read_text()

    def stderr(self, i: int) -> str:
        return (self.tmp / f"stderr.{i}").read_text()

    def wait_for_stderr(self, i: int, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.stderr(i):
            if time.monotonic() > deadline:
                raise AssertionError(f"process {i} never printed {text!r}: {self.stderr(i)}")
            time.sleep(0.1)

    def kill(self, i: int) -> None:
        """Kill process i and the Grain workers it started (as a host dying would)."""
        p = self.procs[i]
        assert p is not None
        try:
            children = psutil.Process(p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        p.kill()
        for c in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                c.kill()

    def left_running(self, grace_s: float = 60.0) -> list[psutil.Process]:
        """The launch's processes still running after up to ``grace_s`` (returned as soon
        as none is: a generous grace waits out a loaded machine's slow exits)."""
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            alive = tagged(self.tag)
            if not alive:
                return []
            time.sleep(0.2)
        return tagged(self.tag)

    def cleanup(self) -> None:
        for p in tagged(self.tag):
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(5)


def pipecheck_argv(n: int, port: int, *args: str, timeout_s: float = 30) -> list[list[str]]:
    """``python -m pipecheck ARGS`` for processes 0..n-1 of a run on ``port``."""
    return [[sys.executable, "-m", "pipecheck", *args, "--coordinator", f"127.0.0.1:{port}",
             "--num-processes", str(n), "--process-id", str(i),
             "--distributed-timeout", str(timeout_s)] for i in range(n)]


@contextlib.contextmanager
def launched(tmp: pathlib.Path, commands: Sequence[Sequence[str] | None],
             cwd: pathlib.Path | None = None) -> Iterator[Launch]:
    launch = Launch(tmp, commands, cwd)  # type: ignore[arg-type]
    try:
        yield launch
    finally:
        launch.cleanup()
