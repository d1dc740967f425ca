"""Multi-process runs on one machine: 2 and 3 local processes joined by jax.distributed
(gloo collectives on CPU), each a real `pipecheck` process with Grain workers."""

from __future__ import annotations

import json
import shutil
import sys
import time

import pytest

from tests.conftest import REPO

from .multihost import free_port, launched, pipecheck_argv

CALIBRATED = ["--set", "workload=calibrated", "--set", "feature_dim=64",
              "--set", "compute_ms=5"]
RUN_TIMEOUT_S = 120


@pytest.mark.timing
def test_three_hosts_one_slow_loader_is_named(tmp_path):
    out = tmp_path / "run.json"
    argv = pipecheck_argv(
        3, free_port(), "dataloader", *CALIBRATED, "--set", "batch_size=24",
        "--set", "load_ms=8", "--set", "straggler_process=2", "--set", "straggler_load_ms=40",
        "--workers", "1", "--batches", "16", "--json", str(out), "--json-per-host")
    with launched(tmp_path, argv) as run:
        codes = run.wait(RUN_TIMEOUT_S)
        assert codes == [0, 0, 0], [run.stderr(i) for i in range(3)]
        assert not run.left_running()
    record = json.loads(out.read_text())
    assert [h["process_id"] for h in record["hosts"]] == [0, 1, 2]
    s = record["straggler"]
    assert s["process_id"] == 2 and s["metric"] == "loader time"
    assert 2.0 < s["ratio"] < 8.0, s  # 40 ms against 8 ms of latency, with 1 worker each
    assert "every host waits for process 2" in s["evidence"]
    assert "straggler: process 2" in run.stdout(0)
    for i in (1, 2):
        lines = run.stdout(i).strip().splitlines()
        assert lines == [f"pipecheck: process {i} of 3 done; process 0 on "
                         f"{record['env']['host']} prints the report and writes {out}"]
        own = json.loads((tmp_path / f"run.process-{i}.json").read_text())
        assert [h["process_id"] for h in own["hosts"]] == [i]


@pytest.mark.timing
def test_two_equal_hosts_have_no_straggler(tmp_path):
    out = tmp_path / "run.json"
    argv = pipecheck_argv(2, free_port(), "dataloader", *CALIBRATED, "--set", "load_ms=10",
                          "--workers", "1", "--batches", "16", "--json", str(out))
    with launched(tmp_path, argv) as run:
        assert run.wait(RUN_TIMEOUT_S) == [0, 0], run.stderr(0) + run.stderr(1)
        assert not run.left_running()
    record = json.loads(out.read_text())
    assert record["straggler"] is None
    assert [f["kind"] for f in record["host_findings"]] == ["hosts-equal"]
    assert "straggler: none" in run.stdout(0)


def test_missing_peer_is_one_line_within_the_timeout(tmp_path):
    argv = pipecheck_argv(2, free_port(), "synthetic", *CALIBRATED, timeout_s=4)
    started = time.monotonic()
    with launched(tmp_path, [argv[0], None]) as run:  # process 1 never starts
        codes = run.wait(60)
        elapsed = time.monotonic() - started
        assert codes[0] == 6, run.stderr(0)
        assert not run.left_running()
    err = run.stderr(0).strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipecheck: error: not all of 2 processes at "
                                               "the coordinator"), err
    assert "joined within 4 s" in err[0]
    assert elapsed < 4 + 30  # the timeout plus start-up, long before JAX's own abort


KILL_CASES = {
    # the loader alone: no collective, process 0 keeps loading; the heartbeat names it
    "dataloader": (["dataloader", *CALIBRATED, "--set", "load_ms=5", "--workers", "1",
                    "--batches", "5000"], "timing 5000 batches"),
    # training: process 0 is blocked in the step's all-reduce when its peer dies
    "compare": (["compare", *CALIBRATED, "--target-steps", "5000"], "[1/4] target step time"),
}


@pytest.mark.parametrize("command", list(KILL_CASES))
def test_killed_peer_is_named_within_the_timeout(tmp_path, command):
    args, started = KILL_CASES[command]
    argv = pipecheck_argv(2, free_port(), *args, timeout_s=5)
    with launched(tmp_path, argv) as run:
        for i in (0, 1):
            run.wait_for_stderr(i, started, 60)
        time.sleep(1.0)  # well inside the measurement
        run.kill(1)
        killed = time.monotonic()
        codes = run.wait(40)
        waited = time.monotonic() - killed
        assert codes[0] == 6, run.stderr(0)
        assert not run.left_running()
    assert waited < 5 + 5, waited
    lines = [line for line in run.stderr(0).splitlines() if "error" in line]
    assert lines == ["pipecheck: error: process 1 stopped responding for 5 s (it died, hung "
                     "or lost its network); stopping. See its log"]


def test_different_configs_are_refused_naming_the_key(tmp_path):
    port = free_port()
    argv = pipecheck_argv(2, port, "synthetic", *CALIBRATED, timeout_s=30)
    argv[1] += ["--set", "seed=3"]
    with launched(tmp_path, argv) as run:
        assert run.wait(60) == [6, 6], run.stderr(0) + run.stderr(1)
        assert not run.left_running()
    for i, (there, here) in enumerate([(3, 0), (0, 3)]):
        err = run.stderr(i).strip().splitlines()
        # pipecheck's one line comes first; JAX's coordination service may log the peer's
        # exit after it (its own absl lines, seen on a busy machine)
        ours = [line for line in err if line.startswith("pipecheck:")]
        assert err[:1] == ours == [
            f"pipecheck: error: process {1 - i} was started with a different config than "
            f"process {i}: seed is {there} there and {here} here; run the same command (same "
            "--config, --set and options) on every process"], err


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["sync-stall", "slow-host"])
def test_monitor_in_a_two_process_user_script(tmp_path, mode):
    """The user's own script (outside the repo, __main__ guard, Grain workers, a real
    all-reduce in the step) under Monitor on 2 processes: process 0's record holds both
    hosts. Every host stalling at once is not a straggler; a host loading slowly is."""
    script = tmp_path / "train.py"
    shutil.copy(REPO / "tests" / "data" / "multihost_loop.py", script)
    out = tmp_path / "run.json"
    port = str(free_port())
    argv = [[sys.executable, str(script), str(out), str(i), "2", port, mode] for i in (0, 1)]
    with launched(tmp_path, argv) as run:
        assert run.wait(RUN_TIMEOUT_S) == [0, 0], run.stderr(0) + run.stderr(1)
        assert not run.left_running()
    record = json.loads(out.read_text())
    assert [h["process_id"] for h in record["hosts"]] == [0, 1]
    kinds = [f["kind"] for f in record["host_findings"]]
    if mode == "sync-stall":
        assert record["straggler"] is None, record["straggler"]
        assert kinds == ["synchronized-stall"]
        assert "every host waited for its data at once" in record["host_findings"][0]["message"]
    else:
        assert record["straggler"]["process_id"] == 1
        assert record["straggler"]["metric"] == "data wait"
        assert kinds[0] == "straggler"
    # (JAX's gloo prints its own "[Gloo] Rank 1 is connected" line before.)
    assert run.stdout(1).strip().splitlines()[-1] == (
        "pipecheck: process 1 of 2 done; process 0 reports every host")


def test_monitor_save_to_keeps_each_host_and_names_a_dead_one(tmp_path):
    """Monitor(save_to=run.json) on 2 processes, process 1 dying after its loop: each
    process kept run.process-I.json while it ran; process 0 writes run.json once the wait
    for the others ran out, with its own host and process 1 named as lost."""
    script = tmp_path / "train.py"
    shutil.copy(REPO / "tests" / "data" / "multihost_loop.py", script)
    out = tmp_path / "run.json"
    port = str(free_port())
    argv = [[sys.executable, str(script), str(out), str(i), "2", port, "sync-stall", "save",
             "dead-1"] for i in (0, 1)]
    with launched(tmp_path, argv) as run:
        lost = run.procs[1]
        assert lost is not None and lost.wait(RUN_TIMEOUT_S) == 9, run.stderr(1)
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert out.exists(), run.stderr(0)
    record = json.loads(out.read_text())
    assert record["incomplete"] is None and record["total_steps"] == 40
    assert [h["process_id"] for h in record["hosts"]] == [0]
    assert any(w.startswith("process 1 sent no result within 5 s of process 0")
               for w in record["warnings"]), record["warnings"]
    own = json.loads((tmp_path / "run.process-0.json").read_text())
    assert own["incomplete"] is None and own["total_steps"] == 40
    last = json.loads((tmp_path / "run.process-1.json").read_text())
    assert last["incomplete"]["reason"] == "running"  # its last periodic write
    assert 0 < last["total_steps"] <= 40
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.timing
def test_compare_on_two_hosts_follows_the_slowest_loader(tmp_path):
    """compare on 2 processes (a real all-reduce per step): the straggler is named, and the
    verdict's loader time D is the slowest host's, not process 0's own."""
    out = tmp_path / "run.json"
    argv = pipecheck_argv(2, free_port(), "compare", *CALIBRATED, "--set", "compute_ms=10",
                          "--set", "load_ms=4", "--set", "straggler_process=1",
                          "--set", "straggler_load_ms=40", "--steps", "12",
                          "--target-steps", "6", "--batches", "8", "--workers", "0",
                          "--json", str(out))
    with launched(tmp_path, argv) as run:
        assert run.wait(RUN_TIMEOUT_S) == [0, 0], run.stderr(0) + run.stderr(1)
        assert not run.left_running()
    record = json.loads(out.read_text())
    hosts = {h["process_id"]: h for h in record["hosts"]}
    d = {p: h["loader"][0]["loader_s"] for p, h in hosts.items()}
    assert record["straggler"]["process_id"] == 1, record["host_findings"]
    assert d[1] > 3 * d[0]
    # the slowest host's D
    assert record["estimates"]["loader"]["value"] == pytest.approx(d[1], rel=1e-3)
    assert any("slowest host's loader time" in w for w in record["warnings"])
    assert all(h["step_s"] is not None for h in hosts.values())
