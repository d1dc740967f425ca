"""A Monitor in a multi-process run (``jax.distributed`` initialized by the script, one
process per host): each process's own file, the gather of every process's bounded summary to
process 0 at ``finish``, and what each process writes and reports after it."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable

from pipecheck.encoding import ParallelEncoder
from pipecheck.errors import PipecheckError
from pipecheck.measure import distributed
from pipecheck.measure.hosts import gather_hosts
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult


def multi_process() -> bool:
    """Whether this is one process of several (``jax.distributed`` initialized)."""
    if not distributed.is_initialized():
        return False
    # lazy: JAX imported where used, so `import pipecheck` stays light
    import jax

    return jax.process_count() > 1


def own_path(path: str) -> str:
    """The file this process keeps its record in: ``path``, with ``.process-I`` before the
    extension in a multi-process run."""
    if not multi_process():
        return path
    # lazy: JAX imported where used, so `import pipecheck` stays light
    import jax

    return distributed.per_host_path(path, jax.process_index())


class Hosts:
    """The Monitor's options for a multi-process run, and the session of its gather."""

    def __init__(self, gather: bool, timeout_s: float, json_per_host: bool) -> None:
        self.gather = gather
        self.timeout_s = timeout_s
        self.json_per_host = json_per_host
        self.session: distributed.Session | None = None
        """The gather's session, in a multi-process run once ``finish`` gathered."""

    @property
    def is_reporter(self) -> bool:
        """True on process 0 of a multi-process run (and in a one-process run)."""
        return self.session is None or self.session.is_reporter

    def gathered(self, result: MonitorResult) -> MonitorResult:
        """In a multi-process run, every process sends its bounded summary to process 0,
        whose record gets ``hosts`` and ``straggler``; the others keep their own record. A
        host that sent nothing within the timeout is named in process 0's warnings."""
        if not multi_process():
            return result
        session = distributed.Session(self.timeout_s)
        self.session = session
        gathered = gather_hosts(session, result, tolerate_missing=True)
        session.finish()
        return gathered.reported or gathered.own

    def save(self, result: MonitorResult, path: str, force: bool) -> None:
        """Write ``result`` to ``path`` on process 0 only (its record holds every host); with
        ``json_per_host``, every process also writes its own record to ``path`` with
        ``.process-I`` before the extension."""
        session = self.session
        if session is not None and self.json_per_host:
            own = dataclasses.replace(result, hosts=tuple(
                h for h in result.hosts if h.process_id == session.process_id))
            store.save(own, distributed.per_host_path(path, session.process_id), force,
                       ParallelEncoder())
        if self.is_reporter:
            store.save(result, path, force, ParallelEncoder())

    def elsewhere(self) -> str | None:
        """What the report says on a process other than 0 (None on process 0)."""
        session = self.session
        if session is None or session.is_reporter:
            return None
        return (f"pipecheck: process {session.process_id} of {session.process_count} done; "
                "process 0 reports every host")


def write_gathered(path: str, result: MonitorResult,
                   encode: Callable[[MonitorResult], str]) -> None:
    """Process 0's record with every host, once all answered (or the wait ran out); a
    failure warns (the run's own record is on disk already)."""
    try:
        store.write_text_atomic(path, encode(result), force=True, fsync=True)
    except (OSError, PipecheckError) as e:
        warnings.warn(f"pipecheck: could not write the hosts' record to {path} ({e})",
                      RuntimeWarning, stacklevel=3)
