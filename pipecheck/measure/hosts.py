"""What one host sends to process 0: its result reduced to a bounded ``HostSummary``."""

from __future__ import annotations

import socket
from typing import Sequence, Union

from pipecheck.analysis.straggler import summarize_host
from pipecheck.records.common import StepRecord
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting
from pipecheck.records.hosts import HostLoader, HostSummary
from pipecheck.records.kinds import StepTag
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.synthetic import SyntheticResult


def host_loader(setting: LoaderSetting) -> HostLoader:
    """D with its interval at one loader setting, as the verdict uses it."""
    est, s = setting.loader_time, setting.settings
    return HostLoader(s.workers, s.threads, est.value, est.low, est.high,
                      setting.first_batch_s, s.per_worker_buffer, s.prefetch)


NOT_COMPARABLE_TAGS: tuple[StepTag, ...] = ("compile", "drain", "warmup")
"""Steps no host can compare with another's: compiling, the drain interval, and batches
served from the start-up buffer. Slow steps (anomalies, checkpoints, evals) stay: they are
the stalls the hosts are compared on, and the medians are robust to them."""


def step_triples(steps: Sequence[StepRecord]) -> list[tuple[int, float, float]]:
    """(step, step time, data wait) of every step after the first that hosts can compare."""
    return [(s.step, s.time_s, s.spans.get("data_wait", 0.0)) for s in steps
            if s.step >= 1 and not any(t in NOT_COMPARABLE_TAGS for t in s.tags)]


HostResult = Union[SyntheticResult, DataloaderResult, CompareResult, MonitorResult]
"""What one host measured, in any of the commands that run on many hosts."""


def host_summary(process_id: int, result: HostResult,
                 hostname: str | None = None) -> HostSummary:
    """This host's summary of a synthetic, dataloader, compare or Monitor result."""
    hostname = hostname or socket.gethostname()
    if isinstance(result, DataloaderResult):
        return summarize_host(process_id, hostname, [host_loader(s) for s in result.results])
    steps = step_triples(result.steps)
    if isinstance(result, SyntheticResult):  # no input pipeline: no data wait to compare
        return summarize_host(process_id, hostname, (), steps, with_data_wait=False)
    loader = [host_loader(s) for s in result.loader] if isinstance(result, CompareResult) \
        else []
    return summarize_host(process_id, hostname, loader, steps)
