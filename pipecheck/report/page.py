"""``pipecheck report``: one self-contained HTML page for one or more run records.

The words on the page are the text report's own parts (``report.blocks``): each kind's
``*_parts`` function gives the lines and tables the terminal prints, and the page renders
the same parts as HTML, its first lines (up to the first table: the verdict or headline
with its numbers) in a box at the top, the rest after the charts. The charts
(``report/charts.py``) are inline SVG; the one script (``SCRIPT``) only moves and zooms the
host-time window. Nothing is fetched: no CDN, no font, no image file.

A kind plugs in with one function, ``Record -> RunPage``, registered in ``PAGES``.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
from typing import Callable, Sequence, TypeVar

from pipecheck.errors import ResultFormatError
from pipecheck.records import store
from pipecheck.records.base import Record, TopRecord
from pipecheck.records.common import Distribution, StepRecord
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.records.diff import DiffResult
from pipecheck.records.hosts import HostSummary
from pipecheck.records.imported import ImportedRun
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.profile import ProfileResult
from pipecheck.records.steps import StepTable
from pipecheck.records.synthetic import SyntheticResult
from pipecheck.records.whatif import WhatIfResult
from pipecheck.report import charts
from pipecheck.report.blocks import Part, Table
from pipecheck.report.charts import Chart, ForcedSync, SeriesRun
from pipecheck.report.compare import compare_gains_parts, compare_parts, recommendation_line
from pipecheck.report.dataloader import dataloader_parts
from pipecheck.report.diff import diff_parts, imported_parts, significance_text, value_text
from pipecheck.report.gains import gains_parts
from pipecheck.report.monitor import monitor_parts, verdict_line
from pipecheck.report.plot import sync_label_of
from pipecheck.report.profile import profile_gains_parts, profile_parts
from pipecheck.report.synthetic import synthetic_parts
from pipecheck.report.whatif import format_whatif
from pipecheck.report.whatif_chart import predicted_curve_chart


@dataclasses.dataclass(frozen=True)
class RunPage:
    """What the page shows of one record: the text report's parts, the charts (title and
    chart, None where the record has nothing to draw), and lines repeated in the top box
    (the recommendation)."""

    parts: Sequence[Part]
    charts: Sequence[tuple[str, Chart | None]] = ()
    headline: Sequence[str] = ()
    gains: Sequence[Part] = ()
    """The "what each change buys" section: the headspace and the ranked gains
    (``report.gains``; empty where the record holds none)."""


PAGES: dict[str, Callable[[Record], RunPage]] = {}
"""Record kind -> the function that lays out its page."""

R = TypeVar("R", bound=TopRecord)
"""The record class a page lays out."""


def page_for(cls: type[R]) -> Callable[[Callable[[R], RunPage]], Callable[[R], RunPage]]:
    """Register ``fn`` as the page of ``cls``'s records (``PAGES[cls.KIND]``, which takes a
    record of that class only)."""

    def register(fn: Callable[[R], RunPage]) -> Callable[[R], RunPage]:
        def layout(record: Record) -> RunPage:
            if not isinstance(record, cls):
                raise TypeError(f"the {cls.KIND} page given a {type(record).__name__}")
            return fn(record)

        PAGES[cls.KIND] = layout
        return fn

    return register


StepsRecord = CompareResult | SyntheticResult | MonitorResult | ProfileResult | ImportedRun
"""A record of a run with steps (its charts: ``_run_charts``)."""


SYNC_FINDINGS = ("forced-sync", "harmless-sync")
"""The findings that name a line the sync locator found, with its cost per step."""


def forced_syncs(r: Record) -> tuple[ForcedSync, ...]:
    """The syncs in the user's code a record located: a Monitor run's sync sites (its
    steps' mean), or compare's and profile's sync findings (per steady step)."""
    if isinstance(r, MonitorResult):
        n = max(r.total_steps, 1)
        return tuple(ForcedSync(s.location, s.seconds / n) for s in r.user_sync_sites)
    return tuple(ForcedSync(f.location, f.numbers["seconds_per_step"])
                 for f in getattr(r, "findings", ())
                 if f.kind in SYNC_FINDINGS and f.location and "seconds_per_step" in f.numbers)


def _run_charts(r: StepsRecord, steady: Distribution, hosts: bool = True
                ) -> list[tuple[str, Chart | None]]:
    """The charts of a run with steps: step times, host time per step, Gantt, hosts; the
    ``sync`` span named as the device wait it is (``plot.sync_label_of``)."""
    steps: StepTable[StepRecord] | None = getattr(r, "steps", None)
    sync_label = sync_label_of(r)
    out: list[tuple[str, Chart | None]] = []
    if steps is not None and len(steps):
        out += [("step times", charts.step_series_chart(
                    [SeriesRun("", steps, steady, getattr(r, "anomalies", ()))])),
                ("host time per step", charts.host_time_chart(steps, forced_syncs(r),
                                                             sync_label)),
                ("Gantt of a window of steps", charts.gantt_chart(steps, sync_label))]
    if hosts:
        out.append(("hosts", charts.hosts_chart(getattr(r, "hosts", ()),
                                                getattr(r, "straggler", None))))
    return out


@page_for(CompareResult)
def compare_page(r: CompareResult) -> RunPage:
    goal = r.tuning.target_s * r.tuning.headroom
    chosen = next((i for i, s in enumerate(r.loader) if s.settings == r.tuning.chosen), None)
    limits = {f.location: f.message for f in r.findings if f.location}
    return RunPage(compare_parts(r, gains=False), [
        *_run_charts(r, r.real),
        ("loader settings tried: the tuning path",
         charts.tuning_chart(r.loader, goal, chosen, limits) if r.loader else None),
        ("batch times per setting", charts.batch_time_chart(r.loader) if r.loader else None),
        ("loader time against workers: predicted and measured",
         predicted_curve_chart(r.loader, r.tuning.chosen, int(r.env.get("cpu_count") or 1),
                               goal, r.tuning.ram_budget_mb, r.whatif_check)
         if r.loader else None),
    ], [recommendation_line(r)], compare_gains_parts(r))


@page_for(SyntheticResult)
def synthetic_page(r: SyntheticResult) -> RunPage:
    return RunPage(synthetic_parts(r), _run_charts(r, r.step_time))


@page_for(MonitorResult)
def monitor_page(r: MonitorResult) -> RunPage:
    return RunPage(monitor_parts(r, gains=False), _run_charts(r, r.step_time),
                   [verdict_line(r)], gains_parts(r.headspace_s, r.gains))


@page_for(ProfileResult)
def profile_page(r: ProfileResult) -> RunPage:
    steps = _run_charts(r, r.step_time, hosts=False)  # its hosts are captures: below
    hosts = [HostSummary(i, h.host, data_wait_median_s=h.input_idle_s, step_s=h.step_s,
                         steps=h.steps) for i, h in enumerate(r.hosts)]
    device = ("device time per step",
              charts.device_time_chart(r.steps, r.device_busy_s, r.device_time,
                                       r.device_idle))
    return RunPage(profile_parts(r, gains=False), [
        device, *steps, ("hosts", charts.hosts_chart(hosts, r.straggler,
                                             "device idle for input per step"))],
        [f"recommendation: {r.recommendation}"], profile_gains_parts(r))


@page_for(ImportedRun)
def imported_page(r: ImportedRun) -> RunPage:
    return RunPage(imported_parts(r), _run_charts(r, r.step_time))


@page_for(DataloaderResult)
def dataloader_page(r: DataloaderResult) -> RunPage:
    limits = {f.location: f.message for f in r.limit_findings if f.location}
    return RunPage(dataloader_parts(r), [
        ("loader settings tried", charts.tuning_chart(r.results, None, None, limits)),
        ("batch times per setting", charts.batch_time_chart(r.results)),
        ("hosts", charts.hosts_chart(r.hosts, r.straggler)),
    ])


@page_for(WhatIfResult)
def whatif_page(r: WhatIfResult) -> RunPage:
    return RunPage(format_whatif(r).rstrip("\n").split("\n"))


STEP_TIME_ROW = "step time median"
"""The diff row the verdict is decided on: its change and significance lead the page."""


@page_for(DiffResult)
def diff_page(r: DiffResult) -> RunPage:
    median = next((row for row in r.rows if row.name == STEP_TIME_ROW), None)
    effect = [] if median is None else [
        f"{median.name}: B-A {value_text(median.unit, median.diff, signed=True)} "
        f"({value_text('fraction', median.relative)}), {significance_text(median)}"]
    runs = [SeriesRun("A: ", r.a.steps, r.a.step_time, r.a.anomalies),
            SeriesRun("B: ", r.b.steps, r.b.step_time, r.b.anomalies)]
    return RunPage(diff_parts(r), [("step times, A and B overlaid",
                                    charts.step_series_chart(runs))], [r.verdict, *effect])


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


WRAP_CHARS = 40
"""A table cell longer than this (a change in words, a line of code) may wrap on the page;
shorter ones (numbers, names) stay on one line."""


def _cell_html(c: object) -> str:
    text = str(c)
    return f'<td class="wrap">{esc(text)}</td>' if len(text) > WRAP_CHARS \
        else f"<td>{esc(text)}</td>"


def table_html(t: Table) -> str:
    head = ("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in t.headers)
            + "</tr></thead>") if t.headers else ""
    rows = "".join("<tr>" + "".join(_cell_html(c) for c in row) + "</tr>" for row in t.rows)
    return f'<table class="words">{head}<tbody>{rows}</tbody></table>'


def is_text_table(block: str) -> bool:
    """A block drawn as a text table (a rule of dashes under its header): it keeps its
    columns only as preformatted text."""
    return any("---" in line and not line.replace("-", "").strip()
               for line in block.splitlines())


def lines_html(block: str) -> str:
    """A block of lines that is no table (findings with their fixes, warnings) as lines
    that wrap with the page, each indented as in the text, a list item's wrapped lines
    hanging after its dash."""
    out = []
    for line in block.splitlines():
        text = line.lstrip(" ")
        hang = 2 if text.startswith("- ") else 0
        indent = len(line) - len(text) + hang
        out.append(f'<p style="padding-left:{indent}ch;text-indent:-{hang}ch">{esc(text)}</p>')
    return f'<div class="lines">{"".join(out)}</div>'


def parts_html(parts: Sequence[Part]) -> str:
    """The text report's parts as HTML: a table as a table, a block drawn as a text table
    (breakdowns) as preformatted text, another block of lines (findings) as wrapping
    lines, a line as a paragraph."""
    out = []
    for p in parts:
        if isinstance(p, Table):
            out.append(table_html(p))
        elif "\n" in p:
            out.append(f"<pre>{esc(p)}</pre>" if is_text_table(p) else lines_html(p))
        elif p:
            out.append(f"<p>{esc(p)}</p>")
    return "".join(out)


def split_lead(parts: Sequence[Part]) -> tuple[list[Part], list[Part]]:
    """The report's first lines up to and including its first table, and the rest."""
    for i, p in enumerate(parts):
        if isinstance(p, Table):
            return list(parts[:i + 1]), list(parts[i + 1:])
    return list(parts[:2]), list(parts[2:])


def chart_html(title: str, chart: Chart) -> str:
    note = f'<p class="note">{esc(chart.note)}</p>' if chart.note else ""
    return (f'<div class="panel"><h3>{esc(title)}</h3>{chart.legend}{chart.svg}{note}'
            "</div>")


def context_html(r: Record) -> str:
    """Environment, config and warnings, collapsed."""
    blocks = []
    for name in ("env", "config"):
        values = getattr(r, name, None)
        if values:
            rows = [[k, v if isinstance(v, str) else json.dumps(v)] for k, v in values.items()]
            blocks.append(f"<h4>{name}</h4>" + table_html(Table(rows, ["key", "value"])))
    warnings = getattr(r, "warnings", ())
    if warnings:
        blocks.append("<h4>warnings</h4><ul>" + "".join(f"<li>{esc(w)}</li>" for w in warnings)
                      + "</ul>")
    if not blocks:
        return ""
    return ('<details class="context"><summary>environment, config and warnings'
            f"</summary>{''.join(blocks)}</details>")


def run_html(name: str, r: Record, anchor: str) -> str:
    """One record's section: the headline box, the charts, the rest of the report."""
    kind = getattr(r, "kind", "")
    layout = PAGES.get(kind)
    if layout is None:
        raise ResultFormatError(f"{name} holds a {kind!r} record, which has no HTML page; "
                                f"pages exist for: {', '.join(sorted(PAGES))}")
    page = layout(r)
    lead, rest = split_lead(page.parts)
    headline = "".join(f'<p class="headline">{esc(h)}</p>' for h in page.headline)
    drawn = "".join(chart_html(t, c) for t, c in page.charts if c is not None)
    if page.gains:
        drawn += ('<div class="panel gains"><h3>what each change buys</h3>'
                  f"{parts_html(page.gains)}</div>")
    return (f'<section class="run" id="{anchor}"><h1>{esc(name)} <small>({esc(kind)})</small>'
            f'</h1><div class="lead">{parts_html(lead)}{headline}</div>{drawn}'
            f'<div class="panel words-rest"><h3>the report</h3>{parts_html(rest)}</div>'
            f"{context_html(r)}</section>")


def render_page(runs: Sequence[tuple[str, Record]]) -> str:
    """The whole page: one section per record, a contents line when there are several."""
    sections = [run_html(name, r, f"run-{i}") for i, (name, r) in enumerate(runs)]
    nav = ""
    if len(runs) > 1:
        nav = "<nav>" + " | ".join(f'<a href="#run-{i}">{esc(name)}</a>'
                                   for i, (name, _) in enumerate(runs)) + "</nav>"
    title = esc(", ".join(name for name, _ in runs))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>pipecheck report: {title}</title><style>{STYLE}</style></head><body>"
            f"{nav}{''.join(sections)}<footer>pipecheck report: a self-contained "
            "page (inline SVG charts, no network). The words are the text report's.</footer>"
            f"<script>{SCRIPT}</script></body></html>\n")


def write_report(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str],
                 force: bool = False) -> None:
    """Read every record (each checked for version and kind), then write the page
    atomically: a bad record leaves no file."""
    store.check_writable(out, force)
    runs = [(os.path.basename(str(p)), store.load(p)) for p in paths]
    write_page(runs, out, force)


def write_page(runs: Sequence[tuple[str, Record]], out: str | os.PathLike[str],
               force: bool = False) -> None:
    store.write_text_atomic(out, render_page(runs), force)


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1000px;padding:12px 20px;color:#222;background:#fff}
h1{font-size:20px;margin:18px 0 8px}h1 small{color:#777;font-weight:normal}
h3{font-size:15px;margin:4px 0}
.lead{border-left:5px solid #1f77b4;background:#f3f7fb;padding:6px 14px;margin-bottom:12px}
.lead p:first-child{font-size:18px;font-weight:bold;margin:4px 0}
.headline{font-weight:bold}
.panel{margin:14px 0}
svg.chart{width:100%;height:auto;display:block;font-size:11px}
svg text.alert{fill:#d62728;font-weight:bold}
svg .axes line{stroke:#444}svg .axes .grid{stroke:#e4e4e4}svg text{fill:#333}
svg .line{fill:none;stroke-width:1.2}svg .path{stroke-dasharray:4 3}
svg .band{fill-opacity:.15}svg .median{stroke-dasharray:6 4;stroke-width:1.5}
svg .goal{stroke-dasharray:6 4;stroke-width:1.5}
svg .mark{stroke:#000;stroke-width:.6}svg .chosen{stroke-width:2.5}
svg .whisker{stroke:#333}svg .median-tick{stroke:#000;stroke-width:2}
svg .step-edge{stroke:#999}svg .hover{fill:transparent}svg .hover:hover{fill:rgba(0,0,0,.08)}
.legend{font-size:12px;margin:2px 0}.key{margin-right:14px;white-space:nowrap}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.note{color:#555;font-size:12px;margin:2px 0}
.zoom-controls{font-size:12px}.zoom-controls input{width:35%;vertical-align:middle}
table.words{border-collapse:collapse;margin:6px 0;font-size:13px}
table.words th,table.words td{border-bottom:1px solid #ddd;padding:2px 8px;text-align:left}
table.words td:not(:last-child):not(.wrap){white-space:nowrap}
table.words td.wrap{min-width:16em}
pre{background:#f7f7f7;padding:6px;overflow-x:auto;font-size:12px}
.lines{background:#f7f7f7;padding:4px 8px;font-size:13px}
.lines p{margin:2px 0;overflow-wrap:anywhere}
svg .forced-sync{stroke-dasharray:6 4;stroke-width:2}
details.context{margin:12px 0}summary{cursor:pointer;color:#1f77b4}
nav{margin:8px 0}footer{color:#777;font-size:12px;margin:24px 0}
"""

SCRIPT = """
document.querySelectorAll('svg.zoomed').forEach(function (inner) {
  var panel = inner.closest('.panel');
  var from = panel.querySelector('input.from'), width = panel.querySelector('input.width');
  var label = panel.querySelector('text.window-label');
  var bins = +inner.dataset.bins, h = inner.viewBox.baseVal.height;
  var firsts = inner.dataset.first.split(','), lasts = inner.dataset.last.split(',');
  function update() {
    var w = Math.max(1, +width.value), f = Math.min(+from.value, bins - w);
    from.value = f;
    inner.setAttribute('viewBox', f + ' 0 ' + w + ' ' + h);
    label.textContent = 'steps ' + firsts[f] + '-' + lasts[f + w - 1];
    inner.dataset.window = f + ':' + w;
  }
  from.addEventListener('input', update);
  width.addEventListener('input', update);
  update();
});
"""
