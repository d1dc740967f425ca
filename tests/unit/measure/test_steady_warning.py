"""The warning about steps kept out of the steady state names the run they belong to
(compare's report holds the warnings of several runs)."""

from __future__ import annotations

from pipecheck.measure.synthetic import SYNTHETIC_RUN, steady_distribution
from pipecheck.records.common import StepRecord
from tests.fakes import SimDevice
from tests.unit.monitor.test_monitor_unit import C, monitor_for, user_loop
from tests.unit.step_tables import table


def test_the_synthetic_runs_warning_names_it():
    steps = table(StepRecord(i, 0.050 if i not in (10, 11) else 0.2,
                             ("slow",) if i in (10, 11) else ()) for i in range(20))
    _, warnings = steady_distribution(steps, SYNTHETIC_RUN)
    assert warnings == ["2 step(s) of the synthetic run kept out of the steady state "
                        "(tagged or anomalous): 10, 11"]


def test_the_monitors_warning_names_the_monitors_run():
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    user_loop(dev, mon, 16)
    kept_out = [w for w in mon.finish().warnings if "kept out of the steady state" in w]
    assert kept_out == ["3 step(s) of the Monitor's run kept out of the steady state "
                        "(tagged or anomalous): 5, 10, 15"]
