"""The example outputs in docs/ are produced by tools/make_doc_examples.py; this keeps them
from going stale.

What it checks, honestly: the deterministic examples (``pipecheck diff`` of the stored
MaxText logs: seeded bootstraps, no clock) are regenerated and must match the docs byte for
byte. The timed examples are re-run on fast settings and only their skeleton is compared
(the command and every table's header row): their numbers, and on a busy machine their
verdicts, change from run to run."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import REPO

SCRIPT = REPO / "tools" / "make_doc_examples.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


def test_deterministic_doc_examples_match_the_commands_output_exactly():
    proc = run_script("--check", "--deterministic")
    assert proc.returncode == 0, proc.stderr


def test_timed_doc_examples_have_the_tables_the_commands_print():
    proc = run_script("--check", "--fast", "dataloader-calibrated", "compare-input-bound")
    assert proc.returncode == 0, proc.stderr


def test_a_stale_example_is_caught(tmp_path, monkeypatch):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import make_doc_examples as m
    finally:
        sys.path.remove(str(SCRIPT.parent))
    text = (m.DOCS / "diff.md").read_text()
    start, end = m.find_block(text, "diff-maxtext")
    stale = text[start:end].replace("step time median ", "step time medain ", 1)
    assert stale != text[start:end]
    (tmp_path / "diff.md").write_text(text[:start] + stale + text[end:])
    monkeypatch.setattr(m, "DOCS", tmp_path)
    assert m.check("diff-maxtext", m.EXAMPLES["diff-maxtext"], fast=False)
