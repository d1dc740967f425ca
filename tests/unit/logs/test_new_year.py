"""A log whose run goes over New Year's Eve: absl headers carry no year, so ``1231`` is
followed by ``0101``; its times go on forward, by the step lines' headers (read in bulk
and by pattern) and by the other lines' (an orbax thread writing a line a little late)."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.logs import maxtext as reader

STEP = ("{d} {c} 140233681626944 metric_logger.py:181] completed step: {n}, seconds: 1.000, "
        "loss: 9.{n:03d}")
SAVE = ("{d} {c} 140218007004928 async_checkpointer.py:560] [process=0][thread=async_save] "
        "Background save thread done. Time taken: 30.000000s")


def _log(dates: list[tuple[str, str]], bulk: bool) -> list[str]:
    lines = [STEP.format(d=d, c=c, n=n) for n, (d, c) in enumerate(dates)]
    if not bulk:  # a different tail on every line: no shape holds two of them
        lines = [f"{line}, x{k}: 1" for k, line in enumerate(lines)]
    return lines


@pytest.mark.parametrize("bulk", [True, False])
def test_times_run_on_over_new_years_eve(bulk: bool) -> None:
    dates = [("I1231", "23:59:57.000000"), ("I1231", "23:59:58.000000"),
             ("I1231", "23:59:59.000000"), ("I0101", "00:00:00.000000"),
             ("I0101", "00:00:01.000000"), ("I0101", "00:00:02.000000")]
    lines = _log(dates, bulk)
    # orbax's thread writes a line stamped before the step line above it
    lines.insert(4, SAVE.format(d="I1231", c="23:59:59.500000"))
    p = reader.parse_lines(lines)
    assert p.steps.column("step").tolist() == list(range(6))
    np.testing.assert_allclose(p.line_at, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    done = [e for e in p.events if e.kind == "async_save_done"]
    assert len(done) == 1 and done[0].at_s == pytest.approx(2.5)
    assert done[0].clock == "23:59:59.500000"


def test_a_log_of_one_year_keeps_its_times() -> None:
    # months apart in one year (a long run, or two runs in one file): no year added
    dates = [("I0301", "10:00:00.000000"), ("I0301", "10:00:01.000000"),
             ("I0701", "10:00:00.000000"), ("I0701", "10:00:01.000000")]
    p = reader.parse_lines(_log(dates, True))
    days = (31 + 30 + 31 + 30) * 86400.0
    np.testing.assert_allclose(p.line_at, [0.0, 1.0, days, days + 1.0])
