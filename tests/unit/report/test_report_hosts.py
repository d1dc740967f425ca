"""The hosts table: one row per process, long lists cut to the slowest and the median."""

from __future__ import annotations

from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.hosts import HostLoader, HostSummary
from pipecheck.report.hosts import format_hosts, host_rows


def host(pid: int, d: float) -> HostSummary:
    return HostSummary(pid, f"h{pid}", (HostLoader(2, 1, d, d * 0.9, d * 1.1, 1.5),),
                       data_wait_median_s=0.001, data_wait_p90_s=0.002, step_s=0.05)


def test_rows_exact():
    assert host_rows([host(0, 0.030)]) == [
        ["0", "h0", "30.0 ms [27.0 ms, 33.0 ms]", "1.00 ms / 2.00 ms", "1.50 s", "50.0 ms"]]


def test_many_hosts_keep_the_slowest_and_the_median():
    hosts = [host(p, 0.030 + 0.0001 * p) for p in range(100)]
    rows = host_rows(hosts, GrainSettings(2, threads=1), max_rows=5)
    assert [r[0] for r in rows] == ["49", "96", "97", "98", "99"]
    assert format_hosts(hosts, None, ()).startswith("hosts: 100 processes (showing 16)")


def test_synthetic_hosts_are_not_assessed():
    hosts = [HostSummary(p, "h", step_s=0.05) for p in range(2)]
    assert format_hosts(hosts, None, ()).splitlines()[-1] == (
        "straggler: not assessed (no input pipeline was timed: run dataloader or compare)")
    assert format_hosts([host(0, 0.03), host(1, 0.03)], None, ()).splitlines()[-1] == \
        "straggler: none"
