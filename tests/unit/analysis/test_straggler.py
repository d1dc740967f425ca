"""The straggler analysis on simulated hosts: one slow host, all slow together, none."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipecheck.analysis import straggler as sa
from pipecheck.analysis.verdict import Estimate
from pipecheck.records.hosts import HostLoader, HostSummary


def loader_host(pid: int, mean_s: float, rng: np.random.Generator, n: int = 40,
                jitter: float = 0.05) -> HostSummary:
    """A host whose loader gives batches of ``mean_s`` +- jitter (simulated samples)."""
    samples = list(mean_s * (1 + jitter * rng.standard_normal(n)))
    est = Estimate.of_mean(samples)
    return HostSummary(pid, f"host{pid}", (HostLoader(2, 1, est.value, est.low, est.high,
                                                      0.5),))


def training_host(pid: int, rng: np.random.Generator, steps: int = 60, step_s: float = 0.05,
                  wait_s: float = 0.001, stalls: dict[int, tuple[float, float]] | None = None):
    """A host's steady steps (index, step time, data wait); ``stalls`` maps a step to
    (extra step time, data wait) there."""
    out = []
    for i in range(1, steps + 1):
        t = step_s * (1 + 0.03 * rng.standard_normal())
        w = wait_s * (1 + 0.1 * abs(rng.standard_normal()))
        if stalls and i in stalls:
            extra, w = stalls[i]
            t += extra
        out.append((i, t, w))
    return sa.summarize_host(pid, f"host{pid}", (), out)


@pytest.mark.parametrize("n", [2, 3, 8, 64])
def test_one_slow_loader_is_named_with_its_ratio(n):
    rng = np.random.default_rng(n)
    hosts = [loader_host(p, 0.030, rng) for p in range(n)]
    slow = n - 1
    hosts[slow] = loader_host(slow, 0.095, rng)
    result = sa.analyze(hosts)
    s = result.straggler
    assert s is not None and s.process_id == slow
    assert s.ratio == pytest.approx(0.095 / 0.030, rel=0.1)
    assert s.metric == "loader time" and s.setting == "workers=2, threads=1"
    assert f"process {slow}" in s.evidence and "95" in s.evidence
    assert [f.kind for f in result.findings] == [sa.STRAGGLER]


@pytest.mark.parametrize("n", [2, 3, 16])
def test_equal_hosts_have_no_straggler(n):
    rng = np.random.default_rng(7)
    hosts = [loader_host(p, 0.030, rng, jitter=0.10) for p in range(n)]
    result = sa.analyze(hosts)
    assert result.straggler is None
    assert [f.kind for f in result.findings] == [sa.HOSTS_EQUAL]


def test_all_hosts_slow_together_is_not_a_straggler():
    # Every host's loader is slow (a shared file system): the job is input-bound, but no
    # host is slower than the others.
    rng = np.random.default_rng(3)
    hosts = [loader_host(p, 0.200, rng) for p in range(4)]
    assert sa.analyze(hosts).straggler is None


def test_a_slightly_slower_host_within_the_ratio_is_not_named():
    # Separated intervals but only 10% slower: below STRAGGLER_MIN_RATIO.
    rng = np.random.default_rng(4)
    hosts = [loader_host(p, 0.030, rng, jitter=0.01) for p in range(3)]
    hosts[1] = loader_host(1, 0.033, rng, jitter=0.01)
    assert 0.033 / 0.030 < sa.STRAGGLER_MIN_RATIO
    assert sa.analyze(hosts).straggler is None


def test_overlapping_intervals_are_noise():
    a = sa.HostValue(0, "a", 0.030, 0.020, 0.060)
    b = sa.HostValue(1, "b", 0.050, 0.040, 0.070)
    assert sa.find_straggler([a, b], "loader time") is None
    c = sa.HostValue(1, "b", 0.080, 0.070, 0.090)
    assert sa.find_straggler([a, c], "loader time") is not None


def test_two_slow_hosts_name_the_slowest_and_the_other():
    values = [sa.HostValue(p, f"h{p}", 0.030, 0.029, 0.031) for p in range(8)]
    values[2] = sa.HostValue(2, "h2", 0.090, 0.088, 0.092)
    values[5] = sa.HostValue(5, "h5", 0.060, 0.058, 0.062)
    s = sa.find_straggler(values, "loader time")
    assert s is not None and s.process_id == 2 and s.others == (5,)
    assert "also slow: process 5" in s.evidence


def test_data_wait_names_the_host_that_waits_for_data_every_step():
    # Real-data steps only (a Monitor run): the straggler waits ~45 ms for data every
    # step; the others wait ~1 ms (and spend the time in the all-reduce).
    rng = np.random.default_rng(5)
    hosts = [training_host(p, rng) for p in range(3)]
    hosts[1] = training_host(1, rng, wait_s=0.045)
    s = sa.analyze(hosts).straggler
    assert s is not None and s.process_id == 1 and s.metric == "data wait"


def test_synchronized_stall_is_not_a_straggler():
    # Every host stalls at steps 20 and 40 together, each waiting for its own data
    # (a shared file system hiccup): job-wide, nobody to blame.
    rng = np.random.default_rng(6)
    stall = {20: (0.3, 0.3), 40: (0.3, 0.3)}
    hosts = [training_host(p, rng, stalls=stall) for p in range(4)]
    result = sa.analyze(hosts)
    assert result.straggler is None
    kinds = [f.kind for f in result.findings]
    assert kinds == [sa.SYNCHRONIZED_STALL]
    assert "20, 40" in result.findings[0].message
    assert "every host waited for its data" in result.findings[0].message


def test_checkpoint_stall_outside_the_data_path():
    rng = np.random.default_rng(8)
    stall = {10: (0.2, 0.001)}  # slow step, no data wait: a checkpoint
    hosts = [training_host(p, rng, stalls=stall) for p in range(3)]
    result = sa.analyze(hosts)
    assert result.straggler is None
    assert result.findings[0].kind == sa.SYNCHRONIZED_STALL
    assert "outside the data path" in result.findings[0].message


def test_one_host_stall_that_everyone_waited_for():
    # Under SPMD every host's step 15 is slow, but only process 2 waited for data there.
    rng = np.random.default_rng(9)
    hosts = [training_host(p, rng, stalls={15: (0.3, 0.001)}) for p in range(3)]
    hosts[2] = training_host(2, rng, stalls={15: (0.3, 0.29)})
    result = sa.analyze(hosts)
    assert result.straggler is None  # one step is not a slow host
    assert [f.kind for f in result.findings] == [sa.ONE_HOST_STALL]
    assert "process(es) 2" in result.findings[0].message


def test_stalls_one_step_apart_are_one_event():
    a = HostSummary(0, "a", stalls=(10,), stall_data_wait_s=(0.2,))
    b = HostSummary(1, "b", stalls=(11,), stall_data_wait_s=(0.2,))
    c = HostSummary(2, "c", stalls=(30,), stall_data_wait_s=(0.2,))
    events = sa.stall_events([a, b, c])
    assert [(e.first_step, e.last_step, e.hosts) for e in events] == [
        (10, 11, (0, 1)), (30, 30, (2,))]


def test_summary_is_bounded_whatever_the_run_length():
    rng = np.random.default_rng(10)
    stalls = {i: (0.3, 0.2) for i in range(5, 5000, 50)}  # 100 stalls
    long = training_host(0, rng, steps=5000, stalls=stalls)
    assert len(long.stalls) == sa.MAX_STALLS
    assert len(json.dumps(long.to_dict())) < 2000
    assert HostSummary.from_dict(json.loads(json.dumps(long.to_dict()))) == long


def test_fewer_than_two_hosts_has_nothing_to_compare():
    rng = np.random.default_rng(11)
    assert sa.analyze([loader_host(0, 0.03, rng)]) == sa.HostsAnalysis(None, ())


def test_synthetic_hosts_have_no_data_wait_and_no_equal_loader_claim():
    steps = [(i, 0.05, 0.0) for i in range(1, 20)]
    hosts = [sa.summarize_host(p, "h", (), steps, with_data_wait=False) for p in range(2)]
    assert hosts[0].data_wait_median_s is None
    result = sa.analyze(hosts)
    assert result.straggler is None and result.findings == ()


def test_stalled_steps_kept_for_the_hosts_even_when_out_of_the_steady_state():
    from pipecheck.measure.hosts import step_triples
    from pipecheck.records.common import StepRecord

    steps = [StepRecord(0, 2.0, ("compile",)), StepRecord(1, 0.05, ("warmup",)),
             StepRecord(2, 0.05, spans={"data_wait": 0.01}),
             StepRecord(3, 0.6, ("anomaly",), spans={"data_wait": 0.5}),
             StepRecord(4, 0.3, ("checkpoint",)), StepRecord(5, 0.05, ("drain",))]
    assert step_triples(steps) == [(2, 0.05, 0.01), (3, 0.6, 0.5), (4, 0.3, 0.0)]


def test_a_host_summary_is_the_one_the_gathered_bootstrap_gave(monkeypatch):
    # the summary's interval comes from the coverage medians; with every resample's median
    # taken from its gathered values (the computation they replaced) it is the same record
    for steps in (12, 150, 1000):
        stalls = {3: (0.5, 0.4), steps // 2: (0.3, 0.0)}
        fast = training_host(1, np.random.default_rng(steps), steps, stalls=stalls)
        with monkeypatch.context() as m:
            m.setattr(sa.stats, "COVERAGE_MIN_RESAMPLES", 10**9)
            gathered = training_host(1, np.random.default_rng(steps), steps, stalls=stalls)
        assert fast == gathered and fast.data_wait_low_s < fast.data_wait_high_s
        payload = json.loads(json.dumps(fast.to_dict()))
        assert HostSummary.from_dict(payload) == fast
