"""The stages compare runs are typed by their calls (``compare.Stages``: Protocols, not
``Callable[..., X]``), so a checker holds the tests' fakes to the real stages' signatures.
This runs mypy (in the ``test`` extra) on the tests that fake them."""

from __future__ import annotations

import configparser
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKES = ("tests/unit/test_compare_run.py",)
"""The test modules whose fakes stand in for compare's stages."""

needs_mypy = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install -e '.[test]')")


THIRD_PARTY = "jax.*,jaxlib.*,numpy.*,grain.*,tensorflow_datasets.*,flax.*,optax.*,psutil.*"
"""Packages whose own types the stages' signatures do not use: mypy takes them as ``Any``
instead of analysing them (a cold cache, as in a fresh clone: 3.6 s instead of 8.5 s)."""


def mypy(*paths: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    """mypy on ``paths`` alone (errors of the modules they import are not theirs), with the
    project's settings, or ``config``."""
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                           *(["--config-file", str(config)] if config else []), *paths],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def stage_check_config(folder: Path) -> Path:
    """setup.cfg's [mypy] settings, the third-party packages skipped, a cache of its own (the
    project's cache is kept for the project's settings)."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    settings = "".join(f"{k} = {v}\n" for k, v in parser["mypy"].items())
    settings += f"cache_dir = {folder / 'cache'}\n"
    path = folder / "mypy.ini"
    path.write_text(f"[mypy]\n{settings}\n[mypy-{THIRD_PARTY}]\nfollow_imports = skip\n")
    return path


WRONG_FAKE = (
    "from pipecheck import compare\n"
    "from pipecheck.measure.loader_search import LoaderChoice\n\n\n"
    "def stage(config, path, parts, target_s, opts, progress) -> LoaderChoice:\n"
    "    raise AssertionError\n\n\n"
    "compare.Stages(loader=stage)\n")
"""A loader stage that takes one argument too few."""


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One mypy run (its start-up and the analysis of pipecheck are most of its time) over
    the fakes and a fake with another signature: (that fake's path, the run)."""
    folder = tmp_path_factory.mktemp("stages")
    fake = folder / "wrong_fake.py"
    fake.write_text(WRONG_FAKE)
    return fake, mypy(*FAKES, str(fake), config=stage_check_config(folder))


def errors_in(proc: subprocess.CompletedProcess[str], path: str) -> list[str]:
    """mypy's errors in the file named as ``path`` is (by its name: mypy's cache may give
    an unchanged module's errors with the path it had when they were found)."""
    name = Path(path).name
    return [line for line in proc.stdout.splitlines()
            if ": error:" in line and Path(line.split(":", 1)[0]).name == name]


@needs_mypy
def test_the_fakes_of_compares_stages_have_the_stages_signatures(checked):
    fake, proc = checked
    assert [e for f in FAKES for e in errors_in(proc, f)] == [], proc.stdout + proc.stderr
    # nothing but the wrong fake's error: the run checked the fakes and found them right
    assert proc.returncode == 1 and "Found 1 error in 1 file" in proc.stdout, proc.stdout


@needs_mypy
def test_a_fake_with_another_signature_is_caught(checked):
    """The check can fail: a loader stage that takes one argument too few is refused."""
    fake, proc = checked
    [error] = errors_in(proc, str(fake))
    assert 'Argument "loader" to "Stages" has incompatible type' in error, proc.stdout
