"""The HTML page: it says what the text report says (one source), draws the charts the
record has, stays small on a long run, and refuses a bad record without writing a file."""

from __future__ import annotations

import dataclasses
import html.parser
import json
import re

import pytest

from pipecheck.cli import main
from pipecheck.errors import ResultFormatError
from pipecheck.records import store
from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable
from pipecheck.report import charts
from pipecheck.report.blocks import Table, render_text
from pipecheck.report.compare import compare_parts, format_compare
from pipecheck.report.dataloader import dataloader_parts, format_dataloader
from pipecheck.report.diff import diff_parts, format_diff, format_imported, imported_parts
from pipecheck.report.monitor import format_monitor, monitor_parts
from pipecheck.report.page import PAGES, render_page
from pipecheck.report.profile import format_profile, profile_parts
from pipecheck.report.synthetic import format_synthetic, synthetic_parts
from tests import page_records

TEXT = {"compare": (compare_parts, format_compare), "monitor": (monitor_parts, format_monitor),
        "synthetic": (synthetic_parts, format_synthetic),
        "dataloader": (dataloader_parts, format_dataloader),
        "imported": (imported_parts, format_imported), "diff": (diff_parts, format_diff),
        "profile": (profile_parts, format_profile)}


class PageText(html.parser.HTMLParser):
    """The page's visible text (scripts and styles left out), its table rows as lists of
    cells, and the text of its top box."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self.lead: list[str] = []
        self._skip = 0
        self._in_lead = 0
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "svg"):
            self._skip += 1
        if self._in_lead or ("class", "lead") in attrs:
            self._in_lead += tag == "div"
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("script", "style", "svg"):
            self._skip -= 1
        if tag == "div" and self._in_lead:
            self._in_lead -= 1
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._skip:
            return
        self.text.append(data)
        if self._in_lead:
            self.lead.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(page: str) -> PageText:
    p = PageText()
    p.feed(page)
    return p


@pytest.fixture(scope="module")
def records():
    return page_records.every_kind()


@pytest.mark.parametrize("kind", sorted(TEXT))
def test_the_page_says_what_the_text_report_says(records, kind):
    record = records[kind]
    parts_of, format_text = TEXT[kind]
    parts = parts_of(record)
    assert render_text(parts) == format_text(record)  # the terminal prints these parts
    page = parse(render_page([(f"{kind}.json", record)]))
    text = "\n".join(page.text)
    for part in parts:
        if isinstance(part, Table):
            for row in part.rows:
                assert [str(c) for c in row] in page.rows, row
        else:
            for line in part.splitlines():
                assert line.strip() in text, line
    # the report's first line (the verdict or headline) leads the page
    first = parts[0]
    assert isinstance(first, str) and page.lead[0] == first


def test_the_check_fails_when_the_page_drops_a_line(records):
    record = records["compare"]
    page = parse(render_page([("c.json", record)]).replace(record.recommendation, "x"))
    assert f"recommendation: {record.recommendation}" not in "\n".join(page.text)


def test_compare_page_marks_the_chosen_setting_the_straggler_and_the_causes(records):
    page = render_page([("c.json", records["compare"])])
    assert page.count('class="mark chosen"') == 1
    assert page.count('class="host straggler"') == 1
    assert "straggler: process 1 waits 10x longer" in page
    assert "likely cause: data stall (data_wait 200.0 ms of the step)" in page
    assert 'class="zoomed"' in page and "<script>" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_every_record_kind_has_a_page():
    assert set(PAGES) == set(store._KINDS)


def test_a_long_run_is_binned_and_the_page_stays_small():
    n = 200_000
    steps = page_records.long_steps(n, tag_every=100)

    record = dataclasses.replace(page_records.monitor_record(), steps=steps, total_steps=n)
    page = render_page([("long.json", record)])
    assert len(page.encode()) < 1_000_000
    assert f"{n:,} steps binned into" in page
    assert f"{n:,} steps in {charts.MAX_BARS} bars" in page
    assert page.count('class="hover"') == charts.MAX_BARS
    # 1999 checkpoint steps and the anomaly at step 20: the slowest are marked, and it says so
    assert f"The {charts.MAX_MARKERS} slowest of 2,000 tagged or anomalous steps" in page


def _write(tmp_path, data):
    p = tmp_path / "run.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize("change, words", [({"kind": "nope"}, "unknown kind 'nope'"),
                                           ({"format_version": 99}, "format_version 99")])
def test_a_bad_record_is_one_line_and_no_file(tmp_path, capsys, change, words):
    data = store.to_dict(page_records.make_synthetic())
    data.update(change)
    out = tmp_path / "page.html"
    code = main(["report", str(_write(tmp_path, data)), "-o", str(out)])
    assert code == ResultFormatError.exit_code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "run.json"]


def test_html_option_writes_the_page_of_the_run(tmp_path, capsys):
    out = tmp_path / "a.html"
    log = str(page_records.LOGS / "maxtext_a.log")
    assert main(["import", log, "--html", str(out)]) == 0
    page = out.read_text()
    assert f"pipecheck import: {log} (MaxText training log)" in page
    assert main(["import", log, "--json", str(out), "--html", str(out), "--force"]) == 2
    assert "name the same file" in capsys.readouterr().err


def test_several_records_give_one_page_with_a_section_each(records, tmp_path):
    paths = []
    for kind in ("compare", "diff"):
        paths.append(tmp_path / f"{kind}.json")
        store.save(records[kind], paths[-1])
    out = tmp_path / "both.html"
    assert main(["report", *map(str, paths), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count('<section class="run"') == 2
    assert '<a href="#run-0">compare.json</a> | <a href="#run-1">diff.json</a>' in page
    assert page.index("pipecheck compare: INPUT-BOUND") < page.index("pipecheck diff:")


def test_a_run_that_ended_early_says_so_first_on_its_page(records):
    """A Monitor record marked ``incomplete`` (and a diff of one) leads its page with the
    line every reader puts first, before the headline."""
    from pipecheck.records.monitor import RunEnd

    end = RunEnd("exception", "ValueError: loss is nan", 61)
    monitor = dataclasses.replace(records["monitor"], incomplete=end)
    lead = parse(render_page([("m.json", monitor)])).lead
    assert lead[0].startswith("pipecheck: this run ended early at step 61 (ValueError: loss")
    assert lead[1] == "pipecheck monitor: your training loop"
    diff = records["diff"]
    diff = dataclasses.replace(diff, b=dataclasses.replace(diff.b, incomplete=end))
    lead = parse(render_page([("d.json", diff)])).lead
    assert lead[0].startswith("pipecheck: B (") and "ended early at step 61" in lead[0]
    assert not any("ended early" in line
                   for line in parse(render_page([("m.json", records["monitor"])])).lead)


def test_the_host_time_scale_stops_above_the_typical_bars():
    import numpy as np

    steady = np.full(99, 40.0)
    assert charts.host_time_ceiling(steady) == 40.0  # nothing cut
    with_compile = np.append(steady, 1100.0)
    assert charts.host_time_ceiling(with_compile) == charts.HOST_TIME_CLIP * 40.0
    two_x = np.append(steady, 80.0)  # a 2x stall keeps its full height
    assert charts.host_time_ceiling(two_x) == 80.0


def test_the_compile_step_no_longer_flattens_the_host_time_chart(records):
    chart = charts.host_time_chart(records["monitor"].steps)
    assert chart is not None and chart.note
    assert "cut at the top" in chart.note and chart.svg.count('class="cut"') >= 1
    first = records["monitor"].steps[0]
    # the hover text of the cut compile step still gives its whole dispatch time
    assert f"dispatch {charts.ms(first.spans['dispatch'])}" in chart.svg


def test_the_gantt_note_says_which_window_it_shows():
    steps, _ = page_records.run_steps(60)
    chart = charts.gantt_chart(steps)
    assert chart is not None and "around step 30, the first checkpoint/eval/gc step" in chart.note
    untagged = StepTable.from_rows(StepRecord, [
        dataclasses.replace(s, tags=()) if "checkpoint" in s.tags else s for s in steps])
    chart = charts.gantt_chart(untagged)
    assert chart is not None and "from the start of the run (no checkpoint" in chart.note
    assert "around step" not in chart.note


def gantt_lanes(chart_svg):
    """Each Gantt lane's name, its lines joined by a space."""
    return [" ".join(re.findall(r"<tspan[^>]*>([^<]*)</tspan>", m)) for m in
            re.findall(r'<text class="lane"[^>]*>(.*?)</text>', chart_svg)]


def test_the_gantt_names_the_sync_lane_as_the_device_wait(records):
    page = render_page([("m.json", records["monitor"])])
    gantt = re.search(r'aria-label="gantt".*?</svg>', page, flags=re.S)
    assert gantt is not None
    lanes_named = gantt_lanes(gantt[0])
    assert lanes_named[-1] == "device wait (lagged sync)" and "sync" not in lanes_named
    assert re.search(r"<title>device wait \(lagged sync\): [\d.]+ ms</title>", gantt[0])
    assert not re.search(r"<title>sync: ", gantt[0])
    lanes = re.findall(r'<text class="lane" x="([\d.]+)"', gantt[0])
    bars = [float(x) for x in re.findall(r'<rect x="([\d.]+)"', gantt[0])]
    # the names' column is wide enough for the longest line: 13 characters right of x=0
    assert all(float(x) - 13 * charts.LABEL_CHAR_W > 0 for x in lanes)
    assert min(bars) > max(float(x) for x in lanes)  # the bars start right of the names
