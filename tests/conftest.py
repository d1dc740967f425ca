"""Shared fixtures. Unit tests (tests/unit) never touch wall time; integration tests
(tests/integration) run real JAX, Grain workers and the CLI in subprocesses."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 240, env: dict[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pipecheck ARGS`` in a fresh process (fresh JAX backend)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("PIPECHECK_DATA_DIR", str(REPO / ".pytest_cache" / "pipecheck_data"))
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pipecheck", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd or REPO,
    )


@pytest.fixture
def cli_run():
    return run_cli
