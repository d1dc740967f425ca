"""The breakdown table from hand-built step records (exact figures)."""

from __future__ import annotations

import pytest

from pipecheck.analysis.breakdown import breakdown_of_steps
from pipecheck.records.common import StepRecord
from pipecheck.report.format import format_breakdown


def steps() -> list[StepRecord]:
    return [
        StepRecord(0, 1.0, ("compile",), {"data_wait": 0.1, "dispatch": 0.8, "sync": 0.05,
                                          "other": 0.05}),
        StepRecord(1, 0.1, (), {"data_wait": 0.02, "dispatch": 0.001, "sync": 0.07,
                                "other": 0.009}),
        StepRecord(2, 0.4, ("checkpoint",), {"checkpoint": 0.3, "data_wait": 0.02,
                                             "dispatch": 0.001, "sync": 0.07, "other": 0.009}),
        StepRecord(3, 0.2, ("eval", "gc"), {"eval": 0.05, "gc": 0.03, "log": 0.04,
                                            "device_put": 0.01, "save_opt": 0.02,
                                            "dispatch": 0.001, "sync": 0.03, "other": 0.019}),
    ]


def test_categories_partition_the_wall_time() -> None:
    b = breakdown_of_steps(steps(), compile_s=0.7, forced_sync_s=0.02)
    got = {r.category: r.seconds for r in b.rows}
    assert list(got) == ["compile", "data wait", "compute", "sync stall", "checkpoint",
                         "eval", "gc", "save_opt", "other"]
    assert b.wall_s == pytest.approx(1.7) and b.steps == 4
    assert got["compile"] == pytest.approx(0.7)
    assert got["data wait"] == pytest.approx(0.1 + 0.02 + 0.02 + 0.01)
    assert got["compute"] == pytest.approx(0.8 + 0.05 + 0.071 + 0.071 + 0.031 - 0.7)
    assert got["sync stall"] == pytest.approx(0.04 + 0.02)
    assert got["checkpoint"] == pytest.approx(0.3)
    assert got["eval"] == pytest.approx(0.05)
    assert got["gc"] == pytest.approx(0.03)
    assert got["save_opt"] == pytest.approx(0.02)
    assert got["other"] == pytest.approx(0.05 + 0.009 + 0.009 + 0.019 - 0.02)
    assert sum(got.values()) == pytest.approx(b.wall_s)
    assert sum(r.share for r in b.rows) == pytest.approx(1.0)
    assert b.share("checkpoint") == pytest.approx(0.3 / 1.7)


def test_compile_without_a_report_is_the_compile_steps_dispatch() -> None:
    b = breakdown_of_steps(steps())
    assert b.seconds("compile") == pytest.approx(0.8)
    # a reported compile time outside the steps (AOT before the loop) is capped
    assert breakdown_of_steps(steps(), compile_s=5.0).seconds("compile") == pytest.approx(0.8)


def test_forced_sync_never_takes_more_than_other() -> None:
    b = breakdown_of_steps(steps(), forced_sync_s=10.0)
    assert b.seconds("other") == 0.0
    assert b.seconds("sync stall") == pytest.approx(0.04 + 0.087)


def test_format_is_a_table_of_seconds_and_shares() -> None:
    text = format_breakdown(breakdown_of_steps(steps()[1:2]))
    assert text.splitlines() == [
        "where the wall time went (1 steps, 0.100 s wall):",
        "category      seconds    share",
        "----------  ---------  -------",
        "compile       0.000 s     0.0%",
        "data wait     0.020 s    20.0%",
        "compute       0.071 s    71.0%",
        "sync stall    0.000 s     0.0%",
        "checkpoint    0.000 s     0.0%",
        "eval          0.000 s     0.0%",
        "gc            0.000 s     0.0%",
        "other         0.009 s     9.0%",
    ]


def test_forced_syncs_outside_spans_are_each_steps_sync_stall_as_in_the_table() -> None:
    from pipecheck.analysis.breakdown import charge_forced_syncs
    from pipecheck.records.steps import StepTable

    table = StepTable.from_rows(StepRecord, steps())
    charged = charge_forced_syncs(table, {1: 0.004, 3: 0.5, 7: 0.2})  # 7: not kept
    spans = [dict(s.spans) for s in charged]
    assert spans[1]["forced_sync"] == pytest.approx(0.004)
    assert spans[1]["other"] == pytest.approx(0.005)
    # capped at the step's other (a sample's length can exceed what no span covered)
    assert spans[3]["forced_sync"] == pytest.approx(0.019) and spans[3]["other"] == 0.0
    assert "forced_sync" not in spans[0] and spans[0]["other"] == pytest.approx(0.05)
    # the steps' table files it where the Monitor's (from totals) files it: sync stall
    by_steps = breakdown_of_steps(charged, compile_s=0.7)
    from_totals = breakdown_of_steps(table, compile_s=0.7, forced_sync_s=0.004 + 0.019)
    assert by_steps.seconds("sync stall") == pytest.approx(from_totals.seconds("sync stall"))
    assert by_steps.seconds("other") == pytest.approx(from_totals.seconds("other"))
    assert charge_forced_syncs(table, {}) is table
