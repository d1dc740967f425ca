"""Multi-process runs in the commands: the options, joining the job, and the output tail
(process 0 gathers, reports and writes; the others say where the report is)."""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, Mapping, TypeVar

import click

from pipecheck.cli.options import save_json
from pipecheck.config import RunConfig
from pipecheck.encoding import ParallelEncoder
from pipecheck.errors import ConfigError, DistributedError, PipecheckError
from pipecheck.measure.distributed import (
    DEFAULT_TIMEOUT_S,
    DistributedOptions,
    Session,
    fingerprint,
    hard_exit,
    initialize,
    looks_like_lost_peer,
    per_host_path,
)
from pipecheck.measure.hosts import HostResult, gather_hosts
from pipecheck.records import store
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.report.hosts import format_hosts

R = TypeVar("R")
H = TypeVar("H", bound=HostResult)
"""A command's record that can carry every host's summary."""

ACTIVE: list[Session] = []
"""The session of this process's multi-process run, while one is open."""


def distributed_options(f: Callable[..., R]) -> Callable[..., R]:
    """--coordinator, --num-processes, --process-id, --distributed, --distributed-timeout
    and --json-per-host, handed to the command as one ``dist: DistributedOptions``."""

    @functools.wraps(f)
    def wrapper(*args: object, coordinator: str | None, num_processes: int | None,
                process_id: int | None, distributed: bool, distributed_timeout: float,
                json_per_host: bool, **kwargs: object) -> R:
        try:
            dist = DistributedOptions(coordinator, num_processes, process_id, distributed,
                                      distributed_timeout, json_per_host)
        except ConfigError as e:
            raise click.UsageError(str(e)) from None
        if json_per_host and not kwargs.get("json_path"):
            raise click.UsageError("--json-per-host needs --json PATH (each process then "
                                   "writes PATH with .process-I before the extension)")
        return f(*args, dist=dist, **kwargs)

    options = [
        click.option("--json-per-host", is_flag=True,
                     help="Every process also writes its own record next to --json "
                          "(run.json -> run.process-I.json)."),
        click.option("--distributed-timeout", type=float, default=DEFAULT_TIMEOUT_S,
                     show_default=True, metavar="SECONDS",
                     help="Bound on every wait for another process (joining, the config "
                          "check, a peer that died, the gather)."),
        click.option("--distributed", is_flag=True,
                     help="Join a multi-process run, letting JAX detect the cluster (TPU "
                          "pod, SLURM, ...); run the same command on every host."),
        click.option("--process-id", type=click.IntRange(min=0), default=None,
                     help="This process's id, 0..N-1 (jax.distributed.initialize)."),
        click.option("--num-processes", type=click.IntRange(min=1), default=None,
                     help="Processes in the run, one per host (jax.distributed.initialize)."),
        click.option("--coordinator", metavar="HOST:PORT", default=None,
                     help="Process 0's address, the same on every process "
                          "(jax.distributed.initialize). See docs/multihost.md."),
    ]
    for option in options:
        wrapper = option(wrapper)
    return wrapper


def fatal(message: str, code: int) -> None:
    """A peer was lost while this process waits inside JAX: one line, then leave."""
    click.echo(f"pipecheck: error: {message}", err=True)
    hard_exit(code)


@contextlib.contextmanager
def joined(dist: DistributedOptions, command: str, config: RunConfig,
           options: Mapping[str, object]) -> Iterator[Session | None]:
    """Join the multi-process run (None for one process) and check every process runs the
    same command; a collective that fails because a peer died becomes the one-line error
    naming that peer."""
    if not dist.enabled:
        yield None
        return

    initialize(dist, on_fatal=fatal)
    session = Session(dist.timeout_s).watch(fatal)
    ACTIVE.append(session)
    session.check_same(fingerprint(command, config.to_dict(), options))
    try:
        yield session
    except (KeyboardInterrupt, click.exceptions.Abort):
        raise
    except PipecheckError as e:
        # The train step failing in a collective is reported as the step's error; when a
        # peer is gone, name the peer instead.
        if looks_like_lost_peer(e):
            lost = session.wait_for_lost_peer()
            if lost is not None:
                raise DistributedError(lost) from None
        raise
    except Exception as e:  # noqa: BLE001 - a collective failed: usually a peer is gone
        lost = session.wait_for_lost_peer()
        if lost is not None:
            raise DistributedError(lost) from None
        raise DistributedError(
            f"a cross-process step failed on process {session.process_id}: "
            f"{' '.join(str(e).split())[:300]}") from None


def report(session: Session | None, dist: DistributedOptions, result: H,
           render: Callable[[H], str], json_path: str | None, force: bool,
           setting: GrainSettings | None = None) -> H | None:
    """Print and save ``result`` (one process), or gather the hosts to process 0, which
    prints and saves the record with ``hosts`` and ``straggler``; the others print one
    line. Returns the record this process reported (None on the other processes)."""
    if session is None:
        click.echo(render(result))
        save_json(result, json_path, force)
        return result

    gathered = gather_hosts(session, result, setting)
    if dist.json_per_host and json_path:
        store.save(gathered.own, per_host_path(json_path, session.process_id), force,
                   ParallelEncoder())
    reported = gathered.reported
    if reported is not None:
        click.echo(render(reported))
        click.echo("")
        click.echo(format_hosts(reported.hosts, reported.straggler, reported.host_findings,
                                setting))
        save_json(reported, json_path, force)
    else:
        where = f" and writes {json_path}" if json_path else ""
        click.echo(f"pipecheck: process {session.process_id} of {session.process_count} "
                   f"done; process 0 on {session.reporter_host()} prints the report{where}")
    session.finish()
    ACTIVE.clear()
    return reported
