"""The loop's verdict on hand-built times: each rule at its threshold, the sync's cost range
(bounded by the host's own work, 0 at the low end with the reason), and the gains' order."""

from __future__ import annotations

import pytest

from pipecheck.analysis.loop_verdict import (
    COMPUTE_BOUND_SHARE,
    FORCED_SYNC_SHARE,
    HOST_BOUND_SHARE,
    INPUT_BOUND_SHARE,
    MIN_VERDICT_STEPS,
    LoopTimes,
    loop_gains,
    loop_headspace,
    loop_verdict,
    sync_costs,
)
from pipecheck.records.common import Breakdown, BreakdownRow
from pipecheck.records.monitor import SyncSiteRecord


def times(input_s: float = 0.0, device_s: float = 0.0, sync_s: float = 0.0,
          own_s: float = 0.0, eval_s: float = 0.0, restart_s: float = 0.0,
          steps: int = 100, steady: int = 90) -> LoopTimes:
    return LoopTimes(steps=steps, input_s=input_s, restart_s=restart_s, device_s=device_s,
                     sync_s=sync_s, hooks_s={"checkpoint": 0.0, "eval": eval_s, "gc": 0.0},
                     own_s=own_s, steady_steps=steady)


def site(seconds: float, where: str = "/home/me/train.py:58", internal: bool = False
         ) -> SyncSiteRecord:
    return SyncSiteRecord(where, "train", "loss.item()", seconds, 10, internal, 0.0)


def test_too_few_steady_steps_is_inconclusive_with_the_number_needed() -> None:
    verdict, reason = loop_verdict(times(input_s=9.0, device_s=1.0,
                                         steady=MIN_VERDICT_STEPS - 3), [])
    assert verdict == "inconclusive"
    assert reason == (f"{MIN_VERDICT_STEPS - 3} steady step(s); a verdict needs at least "
                      f"{MIN_VERDICT_STEPS} (run 3 more)")


def test_input_bound_at_its_share() -> None:
    above = times(input_s=INPUT_BOUND_SHARE * 10 + 0.01, device_s=10 - INPUT_BOUND_SHARE * 10)
    below = times(input_s=INPUT_BOUND_SHARE * 10 - 0.01, device_s=10 - INPUT_BOUND_SHARE * 10)
    assert loop_verdict(above, [])[0] == "input-bound"
    assert loop_verdict(below, [])[0] == "compute-bound"


def test_a_sync_on_a_compute_bound_step_buys_at_most_the_hosts_own_work() -> None:
    """The ResNet loop: .item() every step waits half the run, the host's own work is 2%:
    removing the sync buys at most those 2%, so the loop is compute-bound."""
    t = times(input_s=0.1, device_s=4.8, sync_s=4.9, own_s=0.1)
    costs = sync_costs(t, [site(4.9), site(3.0, "pipecheck/measure/loop.py:1", internal=True)],
                       "cpu")
    (cost,) = costs
    assert cost.high == pytest.approx(0.2) and cost.low == 0.0
    assert "share the cores" in cost.why_low
    verdict, reason = loop_verdict(t, costs)
    assert verdict == "compute-bound"
    assert "forced syncs (49%) buy at most 2%" in reason
    (gain,) = [g for g in loop_gains(t, costs) if g.kind == "sync"]
    assert gain.gain_s.low == 0.0 and gain.gain_s.high == pytest.approx(0.002)
    assert gain.predicted_step_s.high == pytest.approx(0.099)  # 9.9 s over 100 steps
    assert gain.how == "bound" and "train.py:58" in gain.change


def test_a_sync_that_keeps_host_work_off_the_device_is_forced_sync() -> None:
    t = times(input_s=0.5, device_s=3.0, sync_s=3.0, own_s=3.5)
    costs = sync_costs(t, [site(3.0)], "gpu")
    assert costs[0].high == pytest.approx(3.0)
    assert "pipecheck profile" in costs[0].why_low
    verdict, reason = loop_verdict(t, costs)
    assert verdict == "forced-sync" and "/home/me/train.py:58 (loss.item())" in reason
    just_under = times(device_s=10.0, sync_s=1.0, own_s=FORCED_SYNC_SHARE * 11 - 0.05)
    assert loop_verdict(just_under, sync_costs(just_under, [site(1.0)], "gpu"))[0] \
        != "forced-sync"


def test_host_bound_and_the_inconclusive_middle() -> None:
    assert loop_verdict(times(device_s=1.0, own_s=HOST_BOUND_SHARE * 10 / (1 - HOST_BOUND_SHARE)
                              + 0.1), [])[0] == "host-bound"
    middle = times(input_s=2.0, device_s=COMPUTE_BOUND_SHARE * 10 - 1.0, own_s=4.0)
    verdict, reason = loop_verdict(middle, [])
    assert verdict == "inconclusive" and reason.startswith("no part holds the loop's time")


def test_gains_are_ranked_by_their_high_end_and_tiny_ones_left_out() -> None:
    t = times(input_s=3.0, restart_s=2.0, device_s=5.0, eval_s=1.0, own_s=0.001)
    gains = loop_gains(t, [])
    assert [g.change.split(" ")[0] for g in gains] == ["a", "one", "the"]
    assert [g.gain_s.high for g in gains] == pytest.approx([0.03, 0.02, 0.01])
    assert all(g.gain_s.low == 0.0 for g in gains)
    assert loop_verdict(t, [])[1].endswith("(18% in loader restarts), the device 45%")


def test_times_of_a_breakdown_leave_compile_out_and_take_the_restarts_from_data_wait() -> None:
    rows = tuple(BreakdownRow(c, s, 0.0) for c, s in (
        ("compile", 5.0), ("data wait", 3.0), ("compute", 4.0), ("sync stall", 1.0),
        ("eval", 0.5), ("restore", 0.25), ("other", 0.25)))
    t = LoopTimes.of(Breakdown(14.0, 100, rows), 80, restart_s=2.0)
    assert (t.input_s, t.restart_s, t.device_s, t.sync_s, t.own_s) == (1.0, 2.0, 4.0, 1.0, 0.5)
    assert t.total_s == pytest.approx(9.0) and t.host_work_s == pytest.approx(4.0)


def test_headspace_is_the_hosts_time_beside_the_device_waits_with_a_low_end_of_zero() -> None:
    """A forced sync's wait is the device computing, as the lagged sync's is: neither is room
    a fix can buy."""
    h = loop_headspace(times(input_s=3.0, device_s=5.0, sync_s=1.0, steps=100))
    assert h.low == 0.0
    assert h.high == pytest.approx(0.03)
    assert h.value == pytest.approx(0.015)
    assert loop_headspace(times(sync_s=5.0, steps=100)).high == 0.0
    assert loop_headspace(times(device_s=5.0, steps=100)).high == 0.0
