from pipecheck.report.synthetic import format_synthetic
from tests.unit.records.test_store import make_result

EXPECTED = """\
pipecheck synthetic: target step time (compute alone)
---------------------------  ----------------------------
workload                     calibrated
target step time median      55.0 ms
target step time p10 / p90   51.0 ms / 59.0 ms
target step time IQR         5.00 ms
steady-state steps (n)       3
first step (incl. compile)   1.20 s
compile time (train step)    1.00 s
train step compilations      2
examples/s                   600.0 ex/s
TFLOP/s                      0.1000 (workload (analytic))
peak memory (compiled step)  1.0 KiB
devices                      4 x cpu (cpu)
---------------------------  ----------------------------

where the wall time went (2 steps, 1.250 s wall):
category      seconds    share
----------  ---------  -------
compile       1.000 s    80.0%
data wait     0.000 s     0.0%
compute       0.150 s    12.0%
sync stall    0.000 s     0.0%
checkpoint    0.000 s     0.0%
eval          0.000 s     0.0%
gc            0.000 s     0.0%
other         0.100 s     8.0%

findings:
- recompile [batch['x']]: twice
  fix: fix it

warning: few steps"""


def test_synthetic_report_exact():
    assert format_synthetic(make_result()) == EXPECTED


def test_the_wall_time_per_step_stands_beside_the_median_with_its_interval_and_rate():
    import dataclasses

    from pipecheck.records.common import Estimate
    from pipecheck.report.format import WALL_PER_STEP_ROW
    from pipecheck.report.monitor import format_monitor
    from tests.page_records import monitor_record

    record = monitor_record()
    assert WALL_PER_STEP_ROW not in format_monitor(record)  # a record without it
    wall = Estimate(0.0125, 0.0120, 0.0131, 58, "mean")
    lines = format_monitor(dataclasses.replace(record, wall_per_step_s=wall)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("step time median"))
    assert lines[at + 1].split("  ")[0] == WALL_PER_STEP_ROW
    assert lines[at + 1].endswith("12.5 ms (12.0 ms to 13.1 ms; 80.0 steps/s)")
