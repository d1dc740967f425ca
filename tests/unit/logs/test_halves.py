"""A log read in two halves (``maxtext.halves.parse_in_halves``: the second half read apart,
then joined) gives the ``ParsedLog`` one pass gives, cut after any line: every real log at
every line end, logs made to put each joined fact on either side of the cut, and a
generated log with its checkpoints. The child's read runs here (pickled as it travels);
the fork itself is tested in tests/integration/test_import_halves.py."""

from __future__ import annotations

import pathlib
import pickle
from typing import Any, Callable

import numpy as np
import pytest

from pipecheck.logs import forked, maxtext
from pipecheck.logs.maxtext import halves
from tests.maxtext_log import write_log

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
LOGS = sorted((DATA / "real").glob("*.log")) + [DATA / "maxtext_a.log", DATA / "maxtext_b.log"]


class _Here:
    """A ``forked.Child`` stand-in: the work already done here, its result pickled and
    unpickled as the pipe would carry it."""

    def __init__(self, value: Any) -> None:
        self.value = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def result(self) -> Any:
        return pickle.loads(self.value)

    def reap(self) -> None:
        pass


def _here(path: str, work: Callable[..., Any], *args: Any) -> _Here:
    return _Here(work(*args))


def _one_pass(path: pathlib.Path) -> maxtext.ParsedLog:
    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        return maxtext.parse_lines(f)


def _same(a: maxtext.ParsedLog, b: maxtext.ParsedLog, where: str) -> None:
    for name in ("env", "config", "params", "total_tflops_per_step", "memory", "duplicates",
                 "unreadable_steps", "start_seen", "lines", "events", "first_at", "last_at"):
        assert getattr(a, name) == getattr(b, name), (where, name)
    assert a.steps.to_json() == b.steps.to_json(), where
    for name in ("line_at", "has_loss", "own_time"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=where)


MAX_CUTS = 200
"""A longer log is cut after every k-th line (and its first and last few): its 1,100 line
ends would take ~10 s."""


def _line_ends(path: pathlib.Path) -> list[int]:
    data = path.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
    if len(ends) <= MAX_CUTS:
        return ends
    return sorted({*ends[::len(ends) // MAX_CUTS], *ends[:5], *ends[-5:]})


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_a_real_log_cut_after_any_line_reads_as_in_one_pass(log: pathlib.Path) -> None:
    whole = _one_pass(log)
    for cut in _line_ends(log):
        _same(whole, halves.parse_in_halves(log, cut, start=_here), f"{log.name} @ {cut}")


FACTS = [
    "I0101 10:00:00.000000 1 max_utils.py:1] \tUsing (GB) 0.50 / 31.25 (1.6%) on TPU_0",
    "I0101 10:00:00.100000 1 train.py:1] number parameters: 1.100 billion",
    "I0101 10:00:00.200000 1 train.py:1] Per train step:",
    "I0101 10:00:00.300000 1 train.py:1]  Total TFLOPs: 21.09",
    "I0101 10:00:00.400000 1 pyconfig.py:1] Config param steps: 9",
    "I0101 10:00:00.500000 1 train.py:1] completed step: 0, seconds: 9.000, loss: 10.000",
    "I0101 10:00:00.600000 1 max_utils.py:1] \tUsing (GB) 0.70 / 31.25 (2.2%) on TPU_0",
    "I0101 10:00:01.100000 1 train.py:1] completed step: 1, seconds: 0.500, loss: 9.900",
    "I0101 10:00:01.150000 1 pyconfig.py:1] Config param steps: 10",
    "I0101 10:00:01.200000 1 max_utils.py:1] \tUsing (GB) 0.70 / 16.00 (4.4%) on TPU_0",
    "I0101 10:00:01.300000 1 train.py:1] jax version: 0.4.30",
    "I0101 10:00:01.400000 1 checkpointing.py:1] Saving checkpoint at step 1",
    "I0101 10:00:01.600000 1 train.py:1] completed step: 2, seconds: 0.500, loss: 9.800",
    "I0101 10:00:01.700000 1 train.py:1] Per train step, total TFLOPs will be 30.00",
    "I0101 10:00:02.100000 1 train.py:1] completed step: 3, seconds: 0.500, loss: nan",
    "completed step: 4, seconds: 0.500, loss: 9.700",
    "I0101 10:00:02.700000 1 train.py:1] number parameters: 1.200 billion",
    "I0101 10:00:02.800000 1 max_utils.py:1] \tUsing (GB) 0.60 / 31.25 (1.9%) on TPU_0",
]


HELLO = "I0101 09:59:59.000000 1 train.py:1] starting"


@pytest.mark.parametrize("lines, end", [
    (FACTS, "\n"),
    (FACTS, "\r\n"),
    (FACTS[4:] + FACTS[:4], "\n"),  # config and facts after the steps, TFLOPs header last
    ([line for line in FACTS if "completed" not in line] + FACTS[5:8], "\n"),
    (["W0101 10:00:00.0 1 x.py:1] caf\u00e9 \u2028 not a line end here", *FACTS], "\n"),
    ([HELLO, FACTS[4], *FACTS[5:8], FACTS[8]], "\n"),  # only a config shows the start
    ([*FACTS[5:8], FACTS[4]], "\n"),  # a config after the steps shows nothing
], ids=["lf", "crlf", "facts-after-steps", "steps-last", "non-ascii", "config-start",
        "config-late"])
def test_each_fact_joins_as_read_on_wherever_the_cut(tmp_path: pathlib.Path,
                                                      lines: list[str], end: str) -> None:
    log = tmp_path / "facts.log"
    log.write_bytes((end.join(lines) + end).encode() + b"\xff\xfe bad utf-8\n")
    whole = _one_pass(log)
    assert whole.start_seen == (lines[0] == HELLO or len(lines) > 10)
    for cut in _line_ends(log):
        _same(whole, halves.parse_in_halves(log, cut, start=_here), f"cut {cut}")


def test_a_generated_log_with_checkpoints_reads_as_in_one_pass(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "g.log"
    write_log(log, 30_000, seed=4)
    whole = _one_pass(log)
    ends = _line_ends(log)
    for cut in [ends[0], ends[len(ends) // 3], ends[len(ends) // 2], ends[-1]]:
        _same(whole, halves.parse_in_halves(log, cut, start=_here), f"cut {cut}")


def test_where_a_log_is_cut(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "why_not_fork", lambda: None)
    log = tmp_path / "a.log"
    log.write_bytes(b"0123456789\n" * 10)  # 110 bytes: the middle is in line 6
    assert halves.half_way(log, 0) == 66
    assert halves.half_way(log, 111) is None  # smaller than the least worth cutting
    log.write_bytes(b"x" * 100 + b"\n")
    assert halves.half_way(log, 0) is None  # no line end past the middle but the last
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(b"\x1f\x8b" + b"\n" * 100)
    assert halves.half_way(gz, 0) is None
    monkeypatch.setattr(forked, "why_not_fork", lambda: "JAX is imported")
    log.write_bytes(b"0123456789\n" * 10)
    assert halves.half_way(log, 0) is None
