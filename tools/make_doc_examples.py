"""Produce the example outputs in docs/*.md, so that they cannot go stale.

Each example in the docs is a code block right after a marker line::

    <!-- example: NAME (tools/make_doc_examples.py) -->

and NAME is an entry of ``EXAMPLES`` below: the command that produced the block (a
``pipecheck`` command, or a script of ``examples/``, after any runs it reads). Run

    python tools/make_doc_examples.py             # re-run every example, rewrite the docs
    python tools/make_doc_examples.py NAME ...    # only these
    python tools/make_doc_examples.py --check [NAME ...]

``--check`` rewrites nothing: it re-runs the examples and compares them with the docs.
Deterministic examples (``diff`` of stored files: seeded bootstraps, no clock) must match
byte for byte. Timed examples cannot (their numbers, and on a busy machine their verdicts,
change from run to run): for them the check compares the report's skeleton: the first
line's command, and every table the docs show must be printed with the same header row
(a run may print more, e.g. anomalous steps). The test suite checks the timed examples'
skeletons inside the tests that run the same commands (``skeleton_problems``).

Regenerating a timed example keeps the docs' block when the report's first line (the
verdict) differs from the documented one, since the prose around it describes that
verdict: re-run on a quieter machine, or pass ``--force`` and edit the prose.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MARKER = re.compile(r"^<!-- example: (?P<name>[\w-]+) \(tools/make_doc_examples\.py\) -->$")
TIMEOUT_S = 900


@dataclasses.dataclass(frozen=True)
class Example:
    doc: str
    args: tuple[str, ...]
    """``pipecheck`` arguments, run from the repository root."""
    deterministic: bool = False
    show_command: bool = True
    """Start the block with ``$ pipecheck ...`` (False: the docs show it in a block above)."""
    script: bool = False
    """``args`` run a Python script of the repository (``examples/*.py``), not ``pipecheck``."""
    before: tuple[tuple[str, ...], ...] = ()
    """``pipecheck`` commands run first, their stdout discarded (the runs ``args`` reads)."""


CALIBRATED = ("--config", "configs/calibrated.yml")
EXAMPLES = {
    "diff-maxtext": Example(
        "diff.md", ("diff", "tests/data/maxtext_a.log", "tests/data/maxtext_b.log"),
        deterministic=True, show_command=False),
    "diff-real-v6e": Example(
        "diff.md", ("diff", "tests/data/real/maxtext_v6e_linen.log",
                    "tests/data/real/maxtext_v6e_nnx.log"),
        deterministic=True, show_command=False),
    "import-real-gpu": Example(
        "diff.md", ("import", "tests/data/real/maxtext_gpu_llama2_nsys_a.log"),
        deterministic=True, show_command=False),
    "import-maxtext": Example(
        "diff.md", ("import", "tests/data/maxtext_a.log"), deterministic=True,
        show_command=False),
    "whatif-compare": Example(
        "whatif.md", ("whatif", "tests/data/whatif/compare_calibrated_load40_cpu2.json",
                      "--workers", "2", "--threads", "1"), deterministic=True),
    "whatif-cores": Example(
        "whatif.md", ("whatif", "tests/data/whatif/dataloader_calibrated_load20_cpu3.json",
                      "--workers", "8", "--threads", "4", "--cores", "16"),
        deterministic=True),
    "dataloader-calibrated": Example(
        "dataloader.md", ("dataloader", "--set", "workload=calibrated", "--set", "load_ms=80",
                          "--workers", "1,2,4", "--batches", "40")),
    "tuning-main-process-bound": Example(
        "tuning.md", ("dataloader", "--set", "workload=calibrated", "--set", "load_ms=20",
                      "--set", "consumer_ms=15", "--workers", "0,1,2,4", "--batches", "30",
                      "--no-device-put")),
    "tuning-cpu-bound": Example(
        "tuning.md", ("dataloader", "--set", "workload=calibrated", "--set", "cpu_ms=20",
                      "--workers", "1,2,3", "--batches", "30", "--no-device-put")),
    "compare-input-bound": Example(
        "compare.md", ("compare", *CALIBRATED, "--set", "compute_ms=40", "--set", "load_ms=120",
                       "--steps", "40", "--quiet")),
    "compare-default": Example(
        "compare.md", ("compare",)),
    "compare-forced-sync": Example(
        "compare.md", ("compare", *CALIBRATED, "--set", "compute_ms=40", "--set", "load_ms=30",
                       "--set", "host_sync=every_step", "--workers", "0", "--threads", "0",
                       "--steps", "40", "--quiet")),
    "dataloader-demo": Example(
        "dataloader.md", ("dataloader", "--workers", "0,1", "--batches", "50")),
    "dataloader-slow-samples": Example(
        "dataloader.md", ("dataloader", "--config", "configs/heavy-tail.yml", "--workers", "0",
                          "--batches", "24")),
    "synthetic-default": Example(
        "synthetic.md", ("synthetic",)),
    "synthetic-double-compile": Example(
        "synthetic.md", ("synthetic", "--set", "workload=calibrated", "--set", "compute_ms=5",
                         "--set", "devices=4", "--set", "aot_sharding_mismatch=true",
                         "--steps", "10")),
    "timeline-synthetic": Example(
        "timeline.md", ("synthetic", "--set", "workload=calibrated", "--set", "compute_ms=30",
                        "--set", "checkpoint_every=5", "--set", "checkpoint_ms=200",
                        "--set", "eval_every=7", "--set", "eval_ms=50", "--steps", "17",
                        "--json", "run.json", "--trace", "trace.json"),
        show_command=False),
    "diff-synthetic": Example(
        "diff.md", ("diff", "calibrated_40.json", "calibrated_60.json", "--json",
                    "diff_40_60.json"),
        before=tuple(("synthetic", "--set", "workload=calibrated", "--set", f"compute_ms={ms}",
                      "--steps", "30", "--json", f"calibrated_{ms}.json") for ms in (40, 60)),
        show_command=False),
    "profile-forced-sync": Example(
        "profile.md", ("profile", "tests/data/captures/forced_sync.xplane.pb", "--source",
                       "tests/data"), deterministic=True),
    "monitor-loop": Example(
        "monitor.md", ("examples/monitor_loop.py",), script=True, show_command=False),
    "monitor-ended-early": Example(
        "monitor.md", ("examples/monitor_ended_early.py",), script=True, show_command=False),
    "monitor-loader-dynamics": Example(
        "monitor.md", ("examples/monitor_loader_dynamics.py",), script=True),
    "monitor-watch": Example(
        "monitor.md", ("examples/monitor_tensorboard.py",), script=True, show_command=False),
    "storage-slow-mount": Example(
        "storage.md", ("examples/storage_slow_mount.py",), script=True),
    "monitor-nnx-generation": Example(
        "monitor.md", ("examples/nnx_generation_loop.py", "nnx_run.json"), script=True,
        show_command=False),
}


def run(args: tuple[str, ...], script: bool = False,
        before: tuple[tuple[str, ...], ...] = ()) -> str:
    """The command's stdout (stderr goes to ours), after the ``before`` commands; a failed
    command is an error. Files and folders they write in the repository's root (``--json
    run.json``, a script's record, its TensorBoard folder) are removed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p), "COLUMNS": "200"}
    commands = [(b, False) for b in before] + [(args, script)]
    existing = set(REPO.iterdir())
    try:
        for cmd, is_script in commands:
            argv = [sys.executable, *cmd] if is_script else [sys.executable, "-m", "pipecheck",
                                                             *cmd]
            proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True,
                                  timeout=TIMEOUT_S)
            if proc.returncode != 0:
                raise SystemExit(f"example failed (exit {proc.returncode}): "
                                 f"{shown(cmd, is_script)}")
    finally:
        for path in set(REPO.iterdir()) - existing:
            if path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)
    return proc.stdout


def shown(args: tuple[str, ...], script: bool) -> str:
    return shlex.join(("python" if script else "pipecheck", *args))


def block_text(ex: Example, output: str) -> str:
    head = "".join(f"$ {shown(b, False)} > /dev/null\n" for b in ex.before)
    head += f"$ {shown(ex.args, ex.script)}\n"
    head = head if ex.show_command else ""
    return head + output.rstrip("\n") + "\n"


def find_block(text: str, name: str) -> tuple[int, int]:
    """Start and end offsets of the code block's content after ``name``'s marker."""
    lines = text.splitlines(keepends=True)
    offset = 0
    for i, line in enumerate(lines):
        m = MARKER.match(line.rstrip("\n"))
        if m and m.group("name") == name:
            fence = lines[i + 1]
            if not fence.startswith("```"):
                raise SystemExit(f"the marker of {name} is not followed by a code block")
            start = offset + len(line) + len(fence)
            end = text.index("```", start)
            return start, end
        offset += len(line)
    raise SystemExit(f"no marker for example {name} in docs")


def skeleton(text: str) -> list[str]:
    """What a timed report keeps from run to run: its first word pair (the command) and
    the header row of every table (the row above a ``----`` rule; not the last row of a
    key/value table, above the rule that closes it, the same rule as the one it opened with)."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("$ ")]
    out = [" ".join(lines[0].split(":")[0].split())] if lines else []
    opened = ""
    for above, rule in zip(lines, lines[1:], strict=False):
        if not rule.strip():
            opened = ""
        elif rule.startswith("---") and set(rule.replace(" ", "")) == {"-"}:
            if rule != opened:
                out.append(" ".join(above.split()))
            opened = "" if rule == opened else rule
    return out


CONDITIONAL_TABLES = {
    "step time x median likely cause evidence":
        "anomalous steps: listed only when a run has some",
    "span per step share":
        "host spans of the real-data run: only when one ran and its spans took time",
    "run step time x median likely cause evidence":
        "diff's steps kept out of the steady state: only when either run has anomalous ones",
    "location code seconds share":
        "monitor's device waits: only when the sync locator caught the loop waiting",
}
"""Header rows of tables a report prints only when the run has what they show: a documented
one may be missing from another run's output, unless that output has a table starting with
the same column under another header (a renamed column is still caught)."""


def skeleton_problems(name: str, output: str) -> list[str]:
    """How a timed example's output (a real run's stdout, any settings) departs from the
    skeleton its docs block shows: another command, or a documented table it no longer
    prints."""
    ex = EXAMPLES[name]
    text = (DOCS / ex.doc).read_text()
    start, end = find_block(text, name)
    doc_skel, run_skel = skeleton(text[start:end]), skeleton(output)
    run_first_columns = {h.split()[0] for h in run_skel[1:] if h}
    missing = [h for h in doc_skel[1:] if h not in run_skel[1:]
               and not (h in CONDITIONAL_TABLES and h.split()[0] not in run_first_columns)]
    if doc_skel[:1] != run_skel[:1] or missing:
        return [f"{name}: docs/{ex.doc} shows {doc_skel[:1] + missing}, which the command "
                f"no longer prints (it prints {run_skel})"]
    return []


def check(name: str, ex: Example) -> list[str]:
    produced = block_text(ex, run(ex.args, ex.script, ex.before))
    if not ex.deterministic:
        return skeleton_problems(name, produced)
    text = (DOCS / ex.doc).read_text()
    start, end = find_block(text, name)
    return [] if produced == text[start:end] else [f"{name}: docs/{ex.doc} differs from the "
                                                   "command's output; regenerate it"]


def first_report_line(block: str) -> str:
    return next((ln for ln in block.splitlines() if not ln.startswith("$ ")), "")


def regenerate(name: str, ex: Example, force: bool = False) -> None:
    produced = block_text(ex, run(ex.args, ex.script, ex.before))
    path = DOCS / ex.doc
    text = path.read_text()
    start, end = find_block(text, name)
    if not (ex.deterministic or force) and \
            first_report_line(produced) != first_report_line(text[start:end]):
        print(f"docs/{ex.doc}: {name} kept: this run says {first_report_line(produced)!r}, "
              "the docs describe another verdict (re-run on a quieter machine, or --force)",
              file=sys.stderr)
        return
    path.write_text(text[:start] + produced + text[end:])
    print(f"docs/{ex.doc}: {name}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="examples to run (default: all)")
    ap.add_argument("--check", action="store_true", help="compare, rewrite nothing")
    ap.add_argument("--deterministic", action="store_true", help="only deterministic examples")
    ap.add_argument("--force", action="store_true", help="write timed examples whatever they say")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in EXAMPLES]
    if unknown:
        ap.error(f"unknown example(s) {', '.join(unknown)}; known: {', '.join(EXAMPLES)}")
    names = args.names or [n for n, e in EXAMPLES.items()
                           if e.deterministic or not args.deterministic]
    if not args.check:
        for n in names:
            regenerate(n, EXAMPLES[n], args.force)
        return 0
    problems = [p for n in names for p in check(n, EXAMPLES[n])]
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
