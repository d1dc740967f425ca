"""What each change buys: the headspace and every gain shown as a range with its reason, in
the text report and in its own section of the HTML page."""

from __future__ import annotations

import dataclasses

from pipecheck.records.gains import Gain, GainRange, StepInterval
from pipecheck.report.blocks import Table, render_text
from pipecheck.report.gains import GAINS_TITLE, gains_parts
from pipecheck.report.page import render_page
from tests import page_records
from tests.unit.report.test_page import parse

SYNC = Gain(kind="sync", change="read the value at train.py:58 (float(loss)) one step later",
            predicted_step_s=StepInterval(0.0095, 0.009, 0.010), gain_s=GainRange(0.0, 0.001),
            how="bound", why="at most its wait; at least 0: the device may compute meanwhile")
LOADER = Gain(kind="loader-setting", change="workers=4", how="measured",
              predicted_step_s=StepInterval(0.006, 0.005, 0.007), gain_s=GainRange(0.003, 0.005),
              measured_step_s=0.006)


def test_every_gain_and_the_headspace_are_ranges_with_their_reasons() -> None:
    parts = gains_parts(StepInterval(0.004, 0.0, 0.008), (LOADER, SYNC))
    assert parts[0] == ("headspace (R less T: what any input, sync or host-work fix can buy at "
                        "most): 0.00 ms to 8.00 ms per step (low 0: the record cannot say how "
                        "much of the host's time the device computed through)")
    assert parts[1] == GAINS_TITLE
    table = parts[2]
    assert isinstance(table, Table)
    assert [r[:2] for r in table.rows] == [["1", "loader-setting"], ["2", "sync"]]
    assert [r[3] for r in table.rows] == ["3.00 ms to 5.00 ms", "0.00 ms to 1.00 ms"]
    assert parts[3] == f"why each range:\n2. {SYNC.why}"


def test_no_gains_leaves_the_headspace_alone_and_no_record_field_leaves_nothing() -> None:
    assert gains_parts(None, ()) == []
    assert len(gains_parts(StepInterval(0.0, 0.0, 0.0), ())) == 1


def test_the_monitor_page_has_a_section_for_the_gains_and_its_verdict_on_top() -> None:
    record = dataclasses.replace(page_records.every_kind()["monitor"], verdict="forced-sync",
                                 reason="its syncs took 30%", gains=(SYNC,),
                                 headspace_s=StepInterval(0.002, 0.0, 0.004))
    html = render_page([("m.json", record)])
    section = html[html.index('<div class="panel gains">'):]
    section = section[:section.index("</div>")]
    page = parse(section)
    assert "what each change buys" in page.text
    assert html.count(SYNC.change) == 1  # in its section, not again in the report beside it
    assert ["1", "sync", SYNC.change, "0.00 ms to 1.00 ms", "9.00 ms to 10.0 ms",
            "bound"] in page.rows
    assert "verdict: forced-sync (its syncs took 30%)" in "".join(parse(html).lead)
    assert "headspace" in render_text(gains_parts(record.headspace_s, record.gains))


def test_the_compare_page_has_the_section_and_its_notes_once() -> None:
    note = "R (41.0 ms) is within 10% of T (40.0 ms): nothing buys more than 4.00 ms a step"
    record = dataclasses.replace(page_records.every_kind()["compare"], gains=(SYNC,),
                                 headspace_s=StepInterval(0.001, 0.0, 0.002),
                                 gains_notes=(note,))
    html = render_page([("c.json", record)])
    section = html[html.index('<div class="panel gains">'):]
    section = section[:section.index('<div class="panel words-rest">')]
    assert "what each change buys" in section and note in section
    assert "(low 0: R&#x27;s and T&#x27;s intervals overlap)" in section
    assert html.count(SYNC.change) == 1 and html.count(note) == 1
