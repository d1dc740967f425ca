"""The compare report renders the record exactly; older compare files still load."""

from __future__ import annotations

import dataclasses
import json

from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.analysis.verdict import INPUT_BOUND
from pipecheck.records import store
from pipecheck.records.common import CompileInfo, Distribution, Estimate, Finding
from pipecheck.records.compare import CompareResult, Estimates, Tuning
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.report.compare import format_compare, tried_table


def setting(workers, mean_ms, first_s=1.0):
    samples = [mean_ms / 1000.0] * 10
    return LoaderSetting(settings=GrainSettings(workers=workers, threads=1), first_batch_s=first_s,
                         batch_time=Distribution.of(samples), batches_per_s=1000.0 / mean_ms,
                         examples_per_s=32000.0 / mean_ms, examples_per_batch=32,
                         loader_time=loader_estimate(samples, workers, 2))


def make_compare():
    loader = (setting(0, 120.0, 0.12), setting(1, 120.0), setting(4, 30.0, 2.0),
              setting(3, 40.0, 1.5))
    target, real = [0.040] * 20, [0.041] * 20
    return CompareResult(
        env={}, config={"workload": "calibrated"},
        target=Distribution.of(target), loader=loader, real=Distribution.of(real),
        verdict=INPUT_BOUND, verdict_reason="input-bound as loaded at first",
        findings=(Finding("input-bound", "0 worker(s) give 120.0 ms/batch", fix="use 4"),),
        recommendation="use 4 Grain workers",
        tuning=Tuning(meets_target=True, scaling="latency-bound", target_s=0.040,
                      stop_reason="4 workers meet the target with headroom", headroom=0.9,
                      settings_tried=4, stop="met", chosen=loader[2].settings),
        host_spans={"data_wait": 0.001, "sync": 0.039, "other": 0.001},
        compile=CompileInfo(1.0, 0.9, 1), sources={"target": "measured", "loader": "measured",
                                                   "real": "measured"},
        estimates=Estimates(Estimate(0.040, 0.039, 0.041, 20),
                            loader[2].loader_time,  # type: ignore[arg-type]
                            Estimate(0.041, 0.0405, 0.0415, 20),
                            loader[0].loader_time),
    )


EXPECTED = """\
pipecheck compare: INPUT-BOUND
input-bound as loaded at first

measurement                      statistic    value    95% CI              n    source
-------------------------------  -----------  -------  ------------------  ---  --------
target step T (compute alone)    median       40.0 ms  39.0 ms .. 41.0 ms  20   measured
loader D (4 workers, 1 threads)  mean         30.0 ms  30.0 ms .. 30.0 ms  10   measured
real-data step R                 median       41.0 ms  40.5 ms .. 41.5 ms  20   measured

loader settings tried (goal: D <= 36.0 ms, 90% of T as measured before the search)
search: 4 workers meet the target with headroom
workers    threads    first batch    mean/batch    median    p90       meets goal    chosen
---------  ---------  -------------  ------------  --------  --------  ------------  --------
0          1          120.0 ms       120.0 ms      120.0 ms  120.0 ms  no
1          1          1.00 s         120.0 ms      120.0 ms  120.0 ms  no
4          1          2.00 s         30.0 ms       30.0 ms   30.0 ms   yes           yes
3          1          1.50 s         40.0 ms       40.0 ms   40.0 ms   no
pipeline scaling: latency-bound

host time per real-data step (steady state):
span       per step    share
---------  ----------  -------
data_wait  1.00 ms     2%
sync       39.0 ms     95%
other      1.00 ms     2%

findings:
- input-bound: 0 worker(s) give 120.0 ms/batch
  fix: use 4

recommendation: use 4 Grain workers"""


def test_compare_report_renders_the_stored_estimates_exactly():
    assert format_compare(make_compare()) == EXPECTED


def test_compare_record_round_trips_with_its_estimates_and_tuning():
    r = make_compare()
    back = CompareResult.from_dict(json.loads(store.record_to_json(r)))
    assert back == r
    assert isinstance(back.tuning, Tuning) and back.tuning.stop == "met"
    assert back.estimates is not None and back.estimates.loader.statistic == "mean"


def test_every_column_of_the_settings_table_has_a_header():
    table = tried_table(make_compare())
    lines = table.text().splitlines()
    assert lines[0].split() == ["workers", "threads", "first", "batch", "mean/batch", "median",
                                "p90", "meets", "goal", "chosen"]
    assert len(lines[1].split()) == len(table.headers) == len(table.rows[0])
    assert all(table.headers) and [row[-1] for row in table.rows] == ["", "", "yes", ""]


def test_a_search_that_tried_read_threads_first_says_why_under_its_stop_reason():
    r = make_compare()
    order = "reads wait on storage (20.4 ms a read, 8 reads a batch, the processes computing 4%)"
    r = dataclasses.replace(r, tuning=dataclasses.replace(r.tuning, order=order))
    lines = format_compare(r).splitlines()
    at = lines.index("search: 4 workers meet the target with headroom")
    assert lines[at + 1] == f"search order: {order}"
    assert CompareResult.from_dict(json.loads(store.record_to_json(r))).tuning.order == order
