"""The hosts of a multi-process run: one row per process, then the straggler verdict."""

from __future__ import annotations

from typing import Sequence

from tabulate import tabulate

from pipecheck.records.common import Finding
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.hosts import HostLoader, HostSummary, Straggler
from pipecheck.report.format import findings_text
from pipecheck.units import ms

MAX_ROWS = 16
"""Hosts listed one per row; past this, the slowest ones and the median host only."""


def _loader(h: HostSummary, setting: GrainSettings | None) -> HostLoader | None:
    if not h.loader:
        return None
    if setting is not None:
        for s in h.loader:
            if s.settings == setting:
                return s
    return h.loader[-1]


def _d(s: HostLoader | None) -> str:
    return "-" if s is None else f"{ms(s.loader_s)} [{ms(s.low_s)}, {ms(s.high_s)}]"


def host_rows(hosts: Sequence[HostSummary], setting: GrainSettings | None = None,
              max_rows: int = MAX_ROWS) -> list[list[str]]:
    """Rows of the hosts table; a long list keeps the slowest hosts and the median one."""
    def key(h: HostSummary) -> float:
        s = _loader(h, setting)
        if s is not None:
            return s.loader_s
        return h.data_wait_median_s if h.data_wait_median_s is not None else 0.0

    shown = list(hosts)
    if len(shown) > max_rows:
        ranked = sorted(shown, key=key, reverse=True)
        median = ranked[len(ranked) // 2]
        keep = {h.process_id for h in ranked[: max_rows - 1]} | {median.process_id}
        shown = [h for h in hosts if h.process_id in keep]
    return [[str(h.process_id), h.hostname, _d(_loader(h, setting)),
             f"{ms(h.data_wait_median_s)} / {ms(h.data_wait_p90_s)}",
             ms(h.first_batch_s), ms(h.step_s)] for h in shown]


def format_hosts(hosts: Sequence[HostSummary], straggler: Straggler | None,
                 findings: Sequence[Finding], setting: GrainSettings | None = None) -> str:
    """The hosts table, the straggler line and the hosts' findings."""
    if not hosts:
        return ""
    rows = host_rows(hosts, setting)
    where = "" if setting is None else f" at {setting.short_label()}"
    lines = [f"hosts: {len(hosts)} processes"
             + (f" (showing {len(rows)})" if len(rows) < len(hosts) else ""),
             tabulate(rows, headers=["process", "host", f"loader D [95% CI]{where}",
                                     "data wait median / p90", "first batch", "step"],
                      tablefmt="simple"),
             ""]
    compared = any(h.loader or h.data_wait_median_s is not None for h in hosts)
    if straggler is not None:
        lines.append(f"straggler: process {straggler.process_id} ({straggler.hostname}), "
                     f"{straggler.ratio:.1f}x the median host")
    elif compared:
        lines.append("straggler: none")
    else:
        lines.append("straggler: not assessed (no input pipeline was timed: run dataloader "
                     "or compare)")
    if findings:
        lines.append(findings_text(findings))
    return "\n".join(lines)
