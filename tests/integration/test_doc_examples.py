"""The example outputs in docs/ are produced by tools/make_doc_examples.py; this keeps them
from going stale.

What it checks, honestly: the deterministic examples (``pipecheck diff`` of the stored
MaxText logs: seeded bootstraps, no clock) are regenerated and must match the docs byte for
byte. The timed examples are checked by the tests that run the same kind of command
(``doc_examples.skeleton_problems``): only their skeleton (the command and every table's
header row), since their numbers, and on a busy machine their verdicts, change from run to
run."""

from __future__ import annotations

import re
import subprocess
import sys

from ..conftest import REPO
from .doc_examples import make_doc_examples as m

SCRIPT = REPO / "tools" / "make_doc_examples.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


def test_deterministic_doc_examples_match_the_commands_output_exactly():
    proc = run_script("--check", "--deterministic")
    assert proc.returncode == 0, proc.stderr


def test_a_timed_example_missing_a_table_is_caught():
    # The timed examples are checked by the tests that run them (test_compare's input-bound
    # run, test_dataloader_cli's calibrated sweep); here: that the check can fail.
    text = (m.DOCS / "compare.md").read_text()
    start, end = m.find_block(text, "compare-input-bound")
    documented = text[start:end]
    assert m.skeleton_problems("compare-input-bound", documented) == []
    renamed = documented.replace("mean/batch", "mean batch", 1)
    assert m.skeleton_problems("compare-input-bound", renamed)
    # a table a run prints only when it has something to show may be missing ...
    cut = documented.index("real-data anomalous steps")
    no_anomalies = documented[:cut] + documented[documented.index("\n\n", cut) + 2:]
    assert m.skeleton_problems("compare-input-bound", no_anomalies) == []
    # ... but not under another header
    relabelled = documented.replace("span        per step", "span        each step", 1)
    assert m.skeleton_problems("compare-input-bound", relabelled)


def test_a_stale_example_is_caught(tmp_path, monkeypatch):
    text = (m.DOCS / "diff.md").read_text()
    start, end = m.find_block(text, "diff-maxtext")
    stale = text[start:end].replace("step time median ", "step time medain ", 1)
    assert stale != text[start:end]
    (tmp_path / "diff.md").write_text(text[:start] + stale + text[end:])
    monkeypatch.setattr(m, "DOCS", tmp_path)
    assert m.check("diff-maxtext", m.EXAMPLES["diff-maxtext"])


def test_a_key_value_tables_last_row_is_not_a_header():
    # the overview table ends with the same rule it opens with; the row above that closing
    # rule is data: a run of another length has the same skeleton
    text = (m.DOCS / "monitor.md").read_text()
    start, end = m.find_block(text, "monitor-loop")
    documented = text[start:end]
    lines = documented.splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r"-+  -+", line)]
    last_row = lines[rules[1] - 1]
    label, value = re.fullmatch(r"(.*?\S)\s{2,}(\S.*)", last_row).groups()
    assert value and value[0].isdigit(), last_row
    shorter = documented.replace(last_row, last_row.replace(value, "9" + value, 1), 1)
    assert shorter != documented
    assert m.skeleton_problems("monitor-loop", shorter) == []
    assert m.skeleton_problems("monitor-loop", shorter.replace("category ", "kind     ", 1))
