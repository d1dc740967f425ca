"""Multi-process plumbing without processes: options, the config check, the gather and the
heartbeat, on an in-memory key-value store and a fake clock."""

from __future__ import annotations

import pytest

from pipecheck.cli import main
from pipecheck.errors import ConfigError
from pipecheck.measure import distributed as d
from pipecheck.records.hosts import HostLoader, HostSummary
from tests.fakes import FakeClock


class FakeKV:
    """The KeyValueStore interface over a dict shared by the simulated processes."""

    def __init__(self, data: dict[str, str] | None = None, fail: bool = False) -> None:
        self.data = {} if data is None else data
        self.fail = fail
        self.waited: list[tuple[str, float]] = []

    def set(self, key: str, value: str) -> None:
        if self.fail:
            raise RuntimeError("UNAVAILABLE: failed to connect to the coordination service")
        self.data[key] = value

    def get(self, key: str, timeout_s: float) -> str | None:
        self.waited.append((key, timeout_s))
        return self.data.get(key)

    def entries(self, directory: str) -> dict[str, str]:
        if self.fail:
            raise RuntimeError("UNAVAILABLE")
        prefix = directory.rstrip("/") + "/"
        return {k[len(prefix):]: v for k, v in self.data.items() if k.startswith(prefix)}


def session(kv: FakeKV, pid: int, n: int = 3, timeout_s: float = 10.0) -> d.Session:
    return d.Session(timeout_s, kv=kv, process_id=pid, process_count=n,  # type: ignore[arg-type]
                     hostname=f"host{pid}")


# --- options -------------------------------------------------------------------------------
def test_one_process_by_default():
    assert not d.DistributedOptions().enabled


@pytest.mark.parametrize("kwargs, message", [
    ({"coordinator": "h:1"}, "--coordinator also needs --num-processes, --process-id"),
    ({"coordinator": "nohost", "num_processes": 2, "process_id": 0}, "HOST:PORT"),
    ({"coordinator": "h:99999", "num_processes": 2, "process_id": 0}, "HOST:PORT"),
    ({"coordinator": "h:1", "num_processes": 2, "process_id": 2}, "in 0..1"),
    ({"auto": True, "timeout_s": 0}, "> 0 seconds"),
    ({"json_per_host": True}, "needs a multi-process run"),
])
def test_bad_options_say_what_to_fix(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        d.DistributedOptions(**kwargs)


def test_auto_detection_accepts_partial_overrides():
    assert d.DistributedOptions(auto=True, num_processes=4).enabled


def test_cli_refuses_incomplete_options_in_one_line(capsys):
    code = main(["dataloader", "--coordinator", "127.0.0.1:1234"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--coordinator also needs --num-processes, --process-id" in err


def test_cli_json_per_host_needs_json(capsys):
    code = main(["synthetic", "--coordinator", "127.0.0.1:1234", "--num-processes", "2",
                 "--process-id", "0", "--json-per-host"])
    assert code == 2 and "--json-per-host needs --json PATH" in capsys.readouterr().err


def test_per_host_path():
    assert d.per_host_path("out/run.json", 3) == "out/run.process-3.json"
    assert d.per_host_path("run", 0) == "run.process-0.json"


# --- config check ----------------------------------------------------------------------------
def test_same_config_passes_and_a_different_one_is_named():
    kv = FakeKV()
    fp = d.fingerprint("dataloader", {"load_ms": 5.0, "seed": 0}, {"workers": [0, 2]})
    assert fp == {"command": "dataloader", "load_ms": 5.0, "seed": 0, "--workers": [0, 2]}
    for pid in (1, 2):
        session(kv, pid).kv.set(f"config/{pid}", "{}")  # placeholder, overwritten below
    other = dict(fp, load_ms=9.0)
    import json

    kv.data["config/1"] = json.dumps(fp, sort_keys=True)
    kv.data["config/2"] = json.dumps(other, sort_keys=True)
    with pytest.raises(d.DistributedError) as e:
        session(kv, 0).check_same(fp)
    assert str(e.value).startswith(
        "process 2 was started with a different config than process 0: load_ms is 9.0 there "
        "and 5.0 here")
    assert kv.data["reporter"] == "host0"


def test_a_tuple_option_agrees_with_the_list_its_peer_posted():
    """Every process posts its fingerprint as JSON, where a tuple (click's multiple values)
    reads back as a list: the same options on every process are the same config."""
    import json

    kv = FakeKV()
    fp = d.fingerprint("compare", {"seed": 0}, {"workers": (0,), "threads": (1, 2)})
    kv.data["config/1"] = json.dumps(fp, sort_keys=True)
    kv.data["checked/1"] = "1"
    session(kv, 0, n=2).check_same(fp)
    assert json.loads(kv.data["config/0"])["--workers"] == [0]


def test_config_check_names_a_process_that_never_posted():
    kv = FakeKV()
    with pytest.raises(d.DistributedError, match="process 1 did not start its measurement "
                                                 "within 10 s"):
        session(kv, 0, n=2).check_same({"command": "synthetic"})


def test_first_difference_is_sorted_and_sees_missing_keys():
    assert d.first_difference({"a": 1, "b": 2}, {"a": 1, "b": 3}) == "b"
    assert d.first_difference({"a": 1}, {"a": 1, "z": 0}) == "z"
    assert d.first_difference({"a": 1}, {"a": 1}) is None


# --- gather ----------------------------------------------------------------------------------
def summary(pid: int) -> HostSummary:
    return HostSummary(pid, f"host{pid}", (HostLoader(0, 1, 0.01 * (pid + 1), 0.009, 0.011,
                                                      0.2),))


def test_gather_brings_every_summary_to_process_0_only():
    kv = FakeKV()
    start = d._rounds["gather"]
    for pid in (2, 1):  # each process counts its own rounds: the same round here
        d._rounds["gather"] = start
        assert session(kv, pid).gather(summary(pid)) is None
    d._rounds["gather"] = start
    hosts = session(kv, 0).gather(summary(0))
    assert hosts == [summary(0), summary(1), summary(2)]


def test_gather_names_the_processes_that_sent_nothing():
    kv = FakeKV()
    with pytest.raises(d.DistributedError, match=r"^process 1, 2 sent no result within 10 s"):
        session(kv, 0).gather(summary(0))


# --- heartbeat -------------------------------------------------------------------------------
def heartbeat(kv: FakeKV, pid: int, clock: FakeClock, n: int = 3) -> d.Heartbeat:
    return d.Heartbeat(kv, pid, n, timeout_s=5.0, on_fatal=lambda m, c: None,  # type: ignore[arg-type]
                       clock=clock)


def test_live_peers_are_not_reported():
    kv, clock = FakeKV(), FakeClock(100.0)
    beats = [heartbeat(kv, p, clock) for p in range(3)]
    for _ in range(20):
        clock.advance(1.0)
        assert [b.beat() for b in beats] == [None, None, None]


def test_a_peer_that_stops_is_named_after_the_timeout():
    kv, clock = FakeKV(), FakeClock(100.0)
    beats = [heartbeat(kv, p, clock) for p in range(3)]
    for b in beats:
        b.beat()
    for second in range(1, 6):  # process 2 died: only 0 and 1 beat
        clock.advance(1.0)
        assert beats[0].beat() is None, second
        beats[1].beat()
    clock.advance(1.5)  # 5.5 s since process 2's last beat was seen
    assert beats[0].beat() == ("process 2 stopped responding for 5 s (it died, hung or lost "
                               "its network); stopping. See its log")


def test_a_peer_that_finished_is_not_watched():
    kv, clock = FakeKV(), FakeClock(100.0)
    beats = [heartbeat(kv, p, clock, n=2) for p in range(2)]
    for b in beats:
        b.beat()
    kv.data["finished/1"] = "1"
    clock.advance(60)
    assert beats[0].beat() is None


def test_a_peer_that_never_arrives():
    kv, clock = FakeKV(), FakeClock(100.0)
    beat = heartbeat(kv, 0, clock, n=2)
    clock.advance(6)
    assert beat.beat() == ("process 1 never reached the measurement within 5 s of this one; "
                           "see its log")


def test_lost_coordinator():
    clock = FakeClock(100.0)
    assert "lost the connection to process 0" in heartbeat(FakeKV(fail=True), 1, clock).beat()


# --- leaving on an error -------------------------------------------------------------------
def test_process_0_leaves_only_after_every_peer_said_it_leaves(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(d.time, "sleep", slept.append)
    kv = FakeKV()
    session(kv, 2).leave()
    session(kv, 1).leave()
    assert slept == []  # the peers leave at once
    session(kv, 0, timeout_s=60.0).leave()
    # and process 0 keeps the store a moment past their word: they exit right after it
    assert slept == [d.LEAVE_GRACE_S]
    assert {k for k in kv.data if k.startswith("left/")} == {"left/0", "left/1", "left/2"}
    # process 0 waited for each peer's word, bounded by LEAVE_WAIT_S (not the 60 s timeout)
    waits = [(k, t) for k, t in kv.waited if k.startswith("left/")]
    assert [k for k, _ in waits] == ["left/1", "left/2"]
    assert all(0 < t <= d.LEAVE_WAIT_S for _, t in waits)


def test_peers_do_not_wait_and_a_gone_store_does_not_stop_leaving():
    kv = FakeKV()
    session(kv, 1).leave()
    assert kv.waited == []
    session(FakeKV(fail=True), 0).leave()  # raises nothing
