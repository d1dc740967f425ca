"""One vocabulary of where a step's time went (``records.kinds.TimeKind``): every view's
names are tables of it, and every view that stores time by kind uses the kinds' names."""

from __future__ import annotations

import dataclasses

from pipecheck.analysis import profile as ap
from pipecheck.analysis.breakdown import WALL_TABLE_KINDS, breakdown
from pipecheck.monitor.user_spans import TAGGING_SPANS
from pipecheck.records import kinds
from pipecheck.records.events import StepTotals
from pipecheck.records.profile import DeviceIdle
from pipecheck.report.charts import IDLE_CAUSES


def test_each_views_names_are_tables_of_the_time_kinds():
    for table in (kinds.SPANS_OF, kinds.WALL_ROWS, kinds.IDLE_ROWS, kinds.THREAD_SPANS):
        assert set(table) <= set(kinds.TIME_KINDS)
    # every span of pipecheck's own loops (and a Monitor step's forced syncs) is charged to
    # one kind
    assert sorted(s for spans in kinds.SPANS_OF.values() for s in spans) == sorted(
        kinds.STEP_SPAN_NAMES)
    assert len(set(kinds.WALL_ROWS.values())) == len(kinds.WALL_ROWS)
    assert kinds.DEVICE_BUSY_ROW not in kinds.IDLE_ROWS.values()


def test_a_capture_charges_idle_to_the_kinds_a_device_idle_record_stores():
    assert {*ap.THREAD_KINDS, kinds.HOST} == {f.name for f in dataclasses.fields(DeviceIdle)}
    assert set(kinds.IDLE_ROWS) == {f.name for f in dataclasses.fields(DeviceIdle)}
    assert set(kinds.THREAD_SPANS) == set(ap.THREAD_KINDS)
    assert {c.field for c in IDLE_CAUSES} <= set(kinds.IDLE_ROWS)
    assert all(c.row == kinds.IDLE_ROWS[c.kind] for c in IDLE_CAUSES)


def test_the_wall_time_table_has_a_row_per_kind_in_its_order():
    table = breakdown(StepTotals(wall_s=1.0, steps=1, spans={"data_wait": 0.25, "other": 0.5},
                                 compile_dispatch_s=0.0))
    assert [r.category for r in table.rows] == [
        *(kinds.WALL_ROWS[k] for k in WALL_TABLE_KINDS), kinds.WALL_ROWS[kinds.OTHER]]
    assert table.seconds(kinds.WALL_ROWS[kinds.INPUT]) == 0.25


def test_the_monitor_tags_the_steps_of_the_occasional_kinds():
    assert TAGGING_SPANS == {"checkpoint", "eval", "gc"}
