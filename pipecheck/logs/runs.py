"""The runs ``pipecheck diff`` compares, read from files: a pipecheck result (JSON) or a
MaxText training log (plain or gzip), told apart by their content."""

from __future__ import annotations

import json
import os

from pipecheck.analysis.diff import summary_from_imported, summary_from_record
from pipecheck.errors import LogFormatError, ResultFormatError
from pipecheck.logs import maxtext
from pipecheck.logs.text import open_text
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.diff import RunSummary

JSON_PROBE_CHARS = 4096
"""Characters read to tell a JSON result (starts with ``{`` after blanks) from a log."""


def _starts_like_json(head: str) -> bool:
    return head.lstrip().startswith("{")


def is_result_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a pipecheck result (JSON), not a log, as ``load_run``
    tells them apart; a file it cannot open is a LogFormatError."""
    with open_text(path) as f:
        return _starts_like_json(f.read(JSON_PROBE_CHARS))


def load_run(path: str | os.PathLike[str], progress: Progress = NO_PROGRESS) -> RunSummary:
    """A pipecheck result JSON or a MaxText training log, told apart by content. A log is
    streamed, never read whole."""
    with open_text(path) as f:
        head = f.read(JSON_PROBE_CHARS)
        is_json = _starts_like_json(head)
        text = head + f.read() if is_json else ""
    if is_json:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ResultFormatError(
                f"{path} starts like JSON but is not valid JSON (line {e.lineno}: {e.msg})"
            ) from None
        del text
        return summary_from_record(data, str(path))
    try:
        run = maxtext.import_log(path, progress)
    except LogFormatError:
        with open_text(path) as f:
            mentions_steps = any("completed step:" in line for line in f)
        if mentions_steps:
            raise
        raise ResultFormatError(
            f"{path} is neither a pipecheck result (a JSON object with kind and "
            "format_version) nor a MaxText training log (no 'completed step:' lines)"
        ) from None
    return summary_from_imported(run)


def side_files(path: str | os.PathLike[str]) -> list[str]:
    """The runs of one side of a diff: ``path`` itself for a file; for a folder, its files
    (not sub-folders, not hidden files such as ``.DS_Store``) sorted by name. A folder with
    no file is a ResultFormatError."""
    if not os.path.isdir(path):
        return [str(path)]
    names = sorted(n for n in os.listdir(path)
                   if not n.startswith(".") and os.path.isfile(os.path.join(path, n)))
    if not names:
        raise ResultFormatError(
            f"{path} is a folder holding no run: put the runs of one side in it (pipecheck "
            "result JSON files or MaxText training logs), or pass a run's file")
    return [os.path.join(path, n) for n in names]


def load_side(path: str | os.PathLike[str],
              progress: Progress = NO_PROGRESS) -> tuple[RunSummary, ...]:
    """Every run of one side (``side_files``), each read as ``load_run`` reads a file: a
    file in the folder that is not a run is its ResultFormatError, naming that file."""
    return tuple(load_run(f, progress) for f in side_files(path))
