"""What one host sends to process 0: its result reduced to a bounded ``HostSummary``; and
the tail every multi-process run shares (the CLI's commands and the Monitor): gather the
summaries, and on process 0 the record of every host with the straggler named."""

from __future__ import annotations

import dataclasses
import socket
from typing import TYPE_CHECKING, Generic, TypeVar, Union

from pipecheck.analysis.straggler import analyze, summarize_host
from pipecheck.measure.distributed import missing_hosts_message
from pipecheck.records.common import StepRecord
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting
from pipecheck.records.hosts import HostLoader, HostSummary
from pipecheck.records.kinds import StepTag
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.steps import StepTable
from pipecheck.records.synthetic import SyntheticResult

if TYPE_CHECKING:  # pragma: no cover
    from pipecheck.measure.distributed import Session
    from pipecheck.records.grain_settings import GrainSettings


def host_loader(setting: LoaderSetting) -> HostLoader:
    """D with its interval at one loader setting, as the verdict uses it."""
    est, s = setting.loader_time, setting.settings
    return HostLoader(s.workers, s.threads, est.value, est.low, est.high,
                      setting.first_batch_s, s.per_worker_buffer, s.prefetch)


NOT_COMPARABLE_TAGS: tuple[StepTag, ...] = ("compile", "drain", "warmup")
"""Steps no host can compare with another's: compiling, the drain interval, and batches
served from the start-up buffer. Slow steps (anomalies, checkpoints, evals) stay: they are
the stalls the hosts are compared on, and the medians are robust to them."""


def step_triples(steps: StepTable[StepRecord]) -> list[tuple[int, float, float]]:
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


H = TypeVar("H", bound=HostResult)


@dataclasses.dataclass(frozen=True)
class Gathered(Generic[H]):
    """A multi-process run's records after the gather."""

    own: H
    """This process's record, with its own summary in ``hosts``."""
    reported: H | None
    """On process 0: the record with every host's summary, the straggler and the hosts'
    findings; None on the other processes."""


def gather_hosts(session: Session, result: H, setting: GrainSettings | None = None, *,
                 tolerate_missing: bool = False) -> Gathered[H]:
    """Send this process's summary of ``result`` to process 0, which compares the hosts (the
    loader time at ``setting``, or at every setting timed; see ``analysis.straggler``).

    A host that sends nothing within the timeout is a DistributedError, or, with
    ``tolerate_missing`` (the Monitor: the user's run is over and its record must be
    written), left out and named in process 0's warnings (a Monitor record's)."""
    summary = host_summary(session.process_id, result, session.hostname)
    if tolerate_missing:
        hosts, missing = session.gather_available(summary)
    else:
        hosts, missing = session.gather(summary), []
    own = dataclasses.replace(result, hosts=(summary,))
    if hosts is None:
        return Gathered(own, None)
    analysis = analyze(hosts, setting)
    reported = dataclasses.replace(result, hosts=tuple(hosts), straggler=analysis.straggler,
                                   host_findings=analysis.findings)
    if missing and isinstance(reported, MonitorResult):
        reported = dataclasses.replace(reported, warnings=(
            *reported.warnings, missing_hosts_message(missing, session.timeout_s)))
    return Gathered(own, reported)
