"""The stages compare runs are typed by their calls (``compare.Stages``: Protocols, not
``Callable[..., X]``), so a checker holds the tests' fakes to the real stages' signatures.
This runs mypy (in the ``test`` extra) on the tests that fake them."""

from __future__ import annotations

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


def mypy(*paths: str) -> subprocess.CompletedProcess[str]:
    """mypy on ``paths`` alone (errors of the modules they import are not theirs)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                           *paths],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@needs_mypy
def test_the_fakes_of_compares_stages_have_the_stages_signatures():
    proc = mypy(*FAKES)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_mypy
def test_a_fake_with_another_signature_is_caught(tmp_path):
    """The check can fail: a loader stage that takes one argument too few is refused."""
    fake = tmp_path / "wrong_fake.py"
    fake.write_text(
        "from pipecheck import compare\n"
        "from pipecheck.measure.loader_search import LoaderChoice\n\n\n"
        "def stage(config, path, parts, target_s, opts, progress) -> LoaderChoice:\n"
        "    raise AssertionError\n\n\n"
        "compare.Stages(loader=stage)\n")
    proc = mypy(str(fake))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'Argument "loader" to "Stages" has incompatible type' in proc.stdout, proc.stdout
