"""One process per host on JAX's own distributed runtime: join, check, watch, gather.

- ``DistributedOptions``: the arguments of ``jax.distributed.initialize`` (or ``auto`` to
  let JAX detect a TPU pod, SLURM, ...) and the timeout that bounds every wait.
- ``initialize``: joins the job with gloo collectives on CPU. A peer that never joins makes
  JAX abort every process with SIGABRT and a C++ stack (it does not raise): a watchdog
  thread reports it first, as one line, and exits. JAX's own timeouts are set past ours.
- ``KeyValueStore``: JAX's private key-value store client, wrapped.
- ``Session``: the config check (every process must run the same command), a heartbeat
  that notices a peer that died or hung within the timeout, and the gather of each host's
  bounded ``HostSummary`` to process 0.

Fatal conditions found on a helper thread (a peer that never joined or stopped
responding) cannot be raised in the main thread, which is blocked inside JAX: they are
handed to ``on_fatal(message, exit_code)``, which prints the line and ends the process.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import re
import socket
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pipecheck.errors import ConfigError, DistributedError
from pipecheck.records.common import Estimate
from pipecheck.records.hosts import HostSummary

DEFAULT_TIMEOUT_S = 120.0
"""How long any wait for another process may take (joining, the config check, the gather)."""

JAX_TIMEOUT_MARGIN_S = 30
"""JAX's own initialization/heartbeat/shutdown timeouts are ours plus this: when a peer is
missing, pipecheck's one-line error must come before JAX's abort."""

LEAVE_GRACE_S = 0.5
"""After every other process has said it leaves, process 0 keeps the coordination service this
much longer: each of them exits right after saying so, and JAX aborts one whose service goes
first (seen on a busy 2-core machine: a refused peer killed by SIGABRT instead of exit 6)."""
LEAVE_WAIT_S = 5.0
"""After an error, process 0 (it holds JAX's coordination service) waits at most this long for
the other processes to report the error and leave: leaving first makes JAX abort them before
they have said why."""

HEARTBEAT_PERIOD_S = 0.5
"""Each process writes its heartbeat and reads its peers' this often."""

KEY_PREFIX = "pipecheck/"

OnFatal = Callable[[str, int], None]


_HOST_PORT = re.compile(r"^\[?[A-Za-z0-9_.:-]+\]?:(\d{1,5})$")


@dataclasses.dataclass(frozen=True)
class DistributedOptions:
    """How this process joins a multi-process run (all None and ``auto`` False: one process)."""

    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    auto: bool = False
    """``--distributed``: let JAX detect the cluster (TPU pod, SLURM, ...); the explicit
    options, when also given, override what it detects."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    json_per_host: bool = False

    def __post_init__(self) -> None:
        explicit = {"--coordinator": self.coordinator, "--num-processes": self.num_processes,
                    "--process-id": self.process_id}
        given = [k for k, v in explicit.items() if v is not None]
        if given and not self.auto and len(given) < 3:
            missing = [k for k in explicit if k not in given]
            raise ConfigError(
                f"{', '.join(given)} also needs {', '.join(missing)} (the arguments of "
                "jax.distributed.initialize), or add --distributed to let JAX detect the rest")
        if self.coordinator is not None:
            m = _HOST_PORT.match(self.coordinator)
            if not m or not 0 < int(m.group(1)) < 65536:
                raise ConfigError(f"--coordinator must be HOST:PORT (e.g. 10.0.0.1:1234), got "
                                  f"{self.coordinator!r}")
        if self.num_processes is not None and self.num_processes < 1:
            raise ConfigError(f"--num-processes must be >= 1, got {self.num_processes}")
        if (self.process_id is not None and self.num_processes is not None
                and not 0 <= self.process_id < self.num_processes):
            raise ConfigError(f"--process-id must be in 0..{self.num_processes - 1} for "
                              f"--num-processes {self.num_processes}, got {self.process_id}")
        if not self.timeout_s > 0:
            raise ConfigError(f"--distributed-timeout must be > 0 seconds, got {self.timeout_s}")
        if self.json_per_host and not self.enabled:
            raise ConfigError("--json-per-host needs a multi-process run (--coordinator, "
                              "--num-processes, --process-id, or --distributed)")

    @property
    def enabled(self) -> bool:
        return self.auto or self.coordinator is not None


def initialize(options: DistributedOptions, on_fatal: OnFatal) -> None:
    """Join the job (``jax.distributed.initialize``), guarded by a watchdog.

    If the join has not returned after ``timeout_s``, some process never started (or
    cannot reach the coordinator): ``on_fatal`` gets the one-line error before JAX aborts.
    """
    # lazy: JAX imported where used, so `import pipecheck` stays light
    import jax

    # gloo: JAX's cross-process collectives for CPU devices (no effect on GPU/TPU).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    joined = threading.Event()
    timeout = options.timeout_s
    if options.num_processes is not None:
        who = (f"{options.num_processes} processes at the coordinator {options.coordinator} "
               f"(this is process {options.process_id})")
    else:
        who = "every process of the job (cluster detected by JAX)"

    def watchdog() -> None:
        if not joined.wait(timeout):
            on_fatal(
                f"not all of {who} joined within {timeout:g} s: start the same command on "
                "every host, with process ids 0..N-1 and the same --coordinator "
                "(process 0's host), or raise --distributed-timeout",
                DistributedError.exit_code)

    threading.Thread(target=watchdog, name="pipecheck-join-watchdog", daemon=True).start()
    jax_timeout = int(timeout) + JAX_TIMEOUT_MARGIN_S
    try:
        jax.distributed.initialize(
            coordinator_address=options.coordinator,
            num_processes=options.num_processes,
            process_id=options.process_id,
            initialization_timeout=jax_timeout,
            heartbeat_timeout_seconds=jax_timeout,
            shutdown_timeout_seconds=jax_timeout,
        )
    except (RuntimeError, ValueError) as e:
        joined.set()
        raise DistributedError(f"cannot join the multi-process run: "
                               f"{' '.join(str(e).split())[:300]}") from None
    joined.set()


def is_initialized() -> bool:
    """Whether this process has joined a multi-process run (by pipecheck or by the user)."""
    return KeyValueStore.available()


class KeyValueStore:
    """JAX's coordination-service key-value store. Private JAX API: this class is the only
    code that touches it (``jax._src.distributed.global_state.client``)."""

    def __init__(self, client: Any = None) -> None:
        # Any: JAX's private DistributedRuntimeClient, which has no public type
        if client is None:
            from jax._src.distributed import global_state

            client = global_state.client
        if client is None:
            raise DistributedError("JAX's distributed runtime is not initialized "
                                   "(call jax.distributed.initialize first)")
        self._client = client

    @staticmethod
    def available() -> bool:
        try:
            from jax._src.distributed import global_state
        except ImportError:  # pragma: no cover - other JAX versions
            return False
        return global_state.client is not None

    def set(self, key: str, value: str) -> None:
        self._client.key_value_set(KEY_PREFIX + key, value, allow_overwrite=True)

    def get(self, key: str, timeout_s: float) -> str | None:
        """The value of ``key``, waiting up to ``timeout_s`` for it; None if it never came."""
        try:
            return str(self._client.blocking_key_value_get(
                KEY_PREFIX + key, max(1, int(timeout_s * 1000))))
        except Exception as e:  # noqa: BLE001 - JAX raises its runtime error on a timeout
            if "DEADLINE_EXCEEDED" in str(e) or "timed out" in str(e).lower():
                return None
            raise DistributedError(
                "lost the connection to process 0 (the coordinator): it died, hung or lost "
                "its network; see its log") from None

    def entries(self, directory: str) -> dict[str, str]:
        """Every key under ``directory`` (without the directory) and its value."""
        prefix = KEY_PREFIX + directory.rstrip("/") + "/"
        return {k[len(prefix):] if k.startswith(prefix) else k: v
                for k, v in self._client.key_value_dir_get(prefix)}


PEER_FAILURE_SIGNS = ("gloo", "connection reset", "connection refused", "unavailable",
                      "broken pipe", "heartbeat")
"""Words in an error raised by a collective or the runtime when a peer is gone."""


def looks_like_lost_peer(error: BaseException) -> bool:
    """Whether an error (a collective's, maybe wrapped as the user's step failing) may come
    from a peer that died: then the heartbeat's verdict names it."""
    text = str(error).lower()
    return any(sign in text for sign in PEER_FAILURE_SIGNS)


def first_difference(mine: Mapping[str, object], theirs: Mapping[str, object]) -> str | None:
    """The first key (sorted) whose value differs between two flat mappings."""
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            return key
    return None


class Heartbeat:
    """Writes this process's heartbeat and watches its peers' on a helper thread.

    A peer whose counter has not moved for ``timeout_s`` (it died, hung, or lost the
    network), or a coordinator that cannot be reached, is reported with ``on_fatal``. A
    peer that announced ``finished`` is no longer watched.
    """

    def __init__(self, kv: KeyValueStore, process_id: int, process_count: int,
                 timeout_s: float, on_fatal: OnFatal,
                 clock: Callable[[], float] = time.monotonic,
                 period_s: float = HEARTBEAT_PERIOD_S) -> None:
        self.kv, self.process_id, self.process_count = kv, process_id, process_count
        self.timeout_s, self.on_fatal, self.clock, self.period_s = (
            timeout_s, on_fatal, clock, period_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: str | None = None
        """The one-line message, once a peer was found lost."""
        self._beats = 0
        start = clock()
        self._seen: dict[int, tuple[str | None, float]] = {
            p: (None, start) for p in range(process_count) if p != process_id}

    def beat(self) -> str | None:
        """One round: write this heartbeat, read the peers'; the message if one is lost."""
        now = self.clock()
        try:
            self._beats += 1
            self.kv.set(f"alive/{self.process_id}", str(self._beats))
            entries = self.kv.entries("alive")
            finished = self.kv.entries("finished")
        except Exception as e:  # noqa: BLE001 - the coordinator is gone
            if self.process_id == 0:
                return f"the coordination service failed: {' '.join(str(e).split())[:200]}"
            return ("lost the connection to process 0 (the coordinator): it died, hung or "
                    "lost its network; see its log")
        stale = []
        for p, (value, since) in list(self._seen.items()):
            if str(p) in finished:
                del self._seen[p]
                continue
            current = entries.get(str(p))
            if current != value:
                self._seen[p] = (current, now)
            elif now - since > self.timeout_s:
                stale.append((p, value is None))
        if stale:
            names = ", ".join(str(p) for p, _ in stale)
            if all(never for _, never in stale):
                return (f"process {names} never reached the measurement within "
                        f"{self.timeout_s:g} s of this one; see its log")
            return (f"process {names} stopped responding for {self.timeout_s:g} s (it died, "
                    "hung or lost its network); stopping. See its log")
        return None

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            message = self.beat()
            if message is not None and not self._stop.is_set():
                self.lost = message
                self.on_fatal(message, DistributedError.exit_code)
                return

    def start(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="pipecheck-heartbeat",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.period_s * 4)


_rounds = {"gather": 0}


class Session:
    """This process's part in a multi-process run (after ``initialize``)."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, kv: KeyValueStore | None = None,
                 process_id: int | None = None, process_count: int | None = None,
                 hostname: str | None = None) -> None:
        if process_id is None or process_count is None:
            import jax

            process_id, process_count = jax.process_index(), jax.process_count()
        self.kv = kv or KeyValueStore()
        self.process_id = process_id
        self.process_count = process_count
        self.hostname = hostname or socket.gethostname()
        self.timeout_s = timeout_s
        self.heartbeat: Heartbeat | None = None

    @property
    def is_reporter(self) -> bool:
        """Process 0 gathers, prints the report and writes the record."""
        return self.process_id == 0

    def watch(self, on_fatal: OnFatal) -> Session:
        self.heartbeat = Heartbeat(self.kv, self.process_id, self.process_count,
                                   self.timeout_s, on_fatal).start()
        return self

    def check_same(self, fingerprint: Mapping[str, object]) -> None:
        """Refuse to measure when the processes were started with different configs."""
        text = json.dumps({str(k): v for k, v in fingerprint.items()}, sort_keys=True,
                          default=str)
        mine = json.loads(text)  # as the peers read it: a tuple is a list on both sides
        if self.is_reporter:
            self.kv.set("reporter", self.hostname)
        self.kv.set(f"config/{self.process_id}", text)
        peers = range(1, self.process_count) if self.is_reporter else (0,)
        problem: str | None = None
        for p in peers:
            raw = self.kv.get(f"config/{p}", self.timeout_s)
            if raw is None:
                raise DistributedError(f"process {p} did not start its measurement within "
                                       f"{self.timeout_s:g} s; see its log")
            theirs = json.loads(raw)
            key = first_difference(mine, theirs)
            if key is not None and problem is None:
                problem = (
                    f"process {p} was started with a different config than process "
                    f"{self.process_id}: {key} is {theirs.get(key)!r} there and "
                    f"{mine.get(key)!r} here; run the same command (same --config, --set "
                    "and options) on every process")
        self.kv.set(f"checked/{self.process_id}", "1")
        if self.is_reporter:
            # Process 0 holds the store: it stays until every process has read its config,
            # so each of them can name the difference too.
            deadline = time.monotonic() + self.timeout_s
            for p in range(1, self.process_count):
                self.kv.get(f"checked/{p}", max(0.001, deadline - time.monotonic()))
        if problem is not None:
            raise DistributedError(problem)

    def leave(self) -> None:
        """Before leaving on an error: say so, and on process 0 wait (``LEAVE_WAIT_S`` at most)
        until the other processes have said so too, i.e. reported their own error line."""
        try:
            self.kv.set(f"left/{self.process_id}", "1")
            if self.is_reporter:
                deadline = time.monotonic() + min(self.timeout_s, LEAVE_WAIT_S)
                for p in range(1, self.process_count):
                    self.kv.get(f"left/{p}", max(0.001, deadline - time.monotonic()))
                # each of them exits right after saying so; on a busy machine that moment
                # can come late, and the store must outlive it
                time.sleep(LEAVE_GRACE_S)
        except Exception:  # noqa: BLE001 - the store may be gone already: leave all the same
            pass

    # -- values every process must agree on (one collective each) ----------------------
    def _allgather(self, values: Sequence[float]) -> np.ndarray:
        """One row of ``values`` per process (a cross-process collective: every process
        must call it, in the same order)."""
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(np.asarray(values, np.float32)))

    def agree(self, value: float, how: str) -> float:
        """The largest (``max``) or smallest (``min``) of every process's ``value``: so
        every process takes the same decision (the worker search follows the slowest host)."""
        column = self._allgather([value])[:, 0]
        return float(column.max() if how == "max" else column.min())

    def slowest(self, estimate: Estimate) -> Estimate:
        """The estimate of the process whose value is the largest (the host every other
        host waits for), on every process."""
        rows = self._allgather([estimate.value, estimate.low, estimate.high, estimate.n])
        v, lo, hi, n = (float(x) for x in rows[int(rows[:, 0].argmax())])
        return dataclasses.replace(estimate, value=v, low=lo, high=hi, n=int(n))

    def reporter_host(self) -> str:
        """The host name of process 0 (known after ``check_same``)."""
        return self.kv.get("reporter", self.timeout_s) or "process 0's host"

    def gather(self, summary: HostSummary) -> list[HostSummary] | None:
        """Every host's summary on process 0 (sorted by process id); None elsewhere. A host
        that sent nothing within the timeout is a DistributedError."""
        hosts, missing = self.gather_available(summary)
        if missing:
            raise DistributedError(missing_hosts_message(missing, self.timeout_s)
                                   + "; see its log, or raise --distributed-timeout")
        return hosts

    def gather_available(self, summary: HostSummary
                         ) -> tuple[list[HostSummary] | None, list[int]]:
        """On process 0: the summaries of the hosts that answered within the timeout (sorted
        by process id) and the ids of those that did not; elsewhere (None, [])."""
        _rounds["gather"] += 1
        directory = f"gather/{_rounds['gather']}"
        self.kv.set(f"{directory}/{self.process_id}", json.dumps(summary.to_dict()))
        if not self.is_reporter:
            return None, []
        deadline = time.monotonic() + self.timeout_s
        out = [summary]
        missing = []
        for p in range(1, self.process_count):
            raw = self.kv.get(f"{directory}/{p}", max(0.001, deadline - time.monotonic()))
            if raw is None:
                missing.append(p)
            else:
                out.append(HostSummary.from_dict(json.loads(raw)))
        return sorted(out, key=lambda h: h.process_id), missing

    def finish(self) -> None:
        """Say this process is done; the others wait until process 0 has reported."""
        self.kv.set(f"finished/{self.process_id}", "1")
        if self.is_reporter:
            self.kv.set("reported", "1")
        elif self.kv.get("reported", self.timeout_s) is None:
            raise DistributedError(f"process 0 did not finish its report within "
                                   f"{self.timeout_s:g} s; see its log")
        self.close()

    def close(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def wait_for_lost_peer(self, wait_s: float | None = None) -> str | None:
        """After a collective failed: the heartbeat's message naming the lost peer, waiting up
        to the timeout for it (a dead peer's heartbeat goes stale within the timeout)."""
        if self.heartbeat is None:
            return None
        deadline = time.monotonic() + (self.timeout_s + 2 * HEARTBEAT_PERIOD_S
                                       if wait_s is None else wait_s)
        while time.monotonic() < deadline:
            if self.heartbeat.lost is not None:
                return self.heartbeat.lost
            time.sleep(HEARTBEAT_PERIOD_S / 2)
        return self.heartbeat.lost


def hard_exit(code: int) -> None:
    """Leave now, skipping JAX's shutdown barrier (it waits for peers that may be gone and
    then aborts with a C++ stack); stop Grain workers first so none is orphaned."""
    release_children()
    os._exit(code)


def release_children() -> None:
    """Stop this process's Grain workers (none is orphaned) and flush its output: all that
    leaving needs before ``os._exit``, done before a peer is told this process leaves."""
    try:
        for p in multiprocessing.active_children():
            p.terminate()
        for p in multiprocessing.active_children():
            p.join(2.0)
            if p.is_alive():
                p.kill()
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass
    sys.stdout.flush()
    sys.stderr.flush()


def missing_hosts_message(missing: Sequence[int], timeout_s: float) -> str:
    """One line naming the processes that sent no result to process 0."""
    return (f"process {', '.join(str(p) for p in missing)} sent no result within "
            f"{timeout_s:g} s of process 0 (it died, hung, or runs much slower)")


def per_host_path(path: str, process_id: int) -> str:
    """``run.json`` -> ``run.process-1.json`` (``--json-per-host``)."""
    root, ext = os.path.splitext(path)
    return f"{root}.process-{process_id}{ext or '.json'}"


def fingerprint(command: str, config: Mapping[str, object],
                options: Mapping[str, object] | None = None) -> dict[str, object]:
    """What every process must agree on: the command, each config key, each option."""
    out: dict[str, object] = {"command": command}
    out.update({str(k): v for k, v in config.items()})
    out.update({f"--{k.replace('_', '-')}": v for k, v in (options or {}).items()})
    return out

