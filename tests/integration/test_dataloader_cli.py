"""``pipecheck dataloader`` end to end: real Grain workers, the CLI in a subprocess.

Timing assertions are relations with wide margins (other jobs share the 2 cores); every
failure-mode test also checks that no process started by pipecheck is left behind: each
run gets a marker in its environment, which Grain's workers inherit.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from multiprocessing import shared_memory

import psutil
import pytest

from pipecheck.records.codec import decode_array

from ..conftest import REPO, run_cli
from .doc_examples import skeleton_problems

HERE = pathlib.Path(__file__).resolve().parent
PYTHONPATH = os.pathsep.join([str(REPO), str(HERE)])
MARKER = "PIPECHECK_TEST_MARKER"


def _env(marker: str, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": PYTHONPATH, MARKER: marker, **extra}


def leftover(marker: str, grace_s: float = 60.0) -> list[int]:
    """Pids of live processes carrying ``marker`` after up to ``grace_s`` seconds (the
    answer comes as soon as none is left: a generous grace costs a loaded machine nothing
    and waits out its slow exits)."""
    deadline = time.monotonic() + grace_s
    while True:
        pids = []
        for p in psutil.process_iter(["pid"]):
            try:
                if p.environ().get(MARKER) == marker and p.status() != psutil.STATUS_ZOMBIE:
                    pids.append(p.pid)
            except (psutil.Error, OSError):
                continue
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.2)


def error_lines(proc: subprocess.CompletedProcess[str] | tuple[int, str]) -> list[str]:
    err = proc.stderr if hasattr(proc, "stderr") else proc[1]
    return [ln for ln in err.splitlines()
            if ln.strip() and not ln.startswith("pipecheck: workers=")
            and not ln.startswith(("W0", "I0"))]


def user_config(tmp_path: pathlib.Path, dataset: str, **params: float) -> str:
    path = tmp_path / "workload.yml"
    items = ", ".join(f"{k}: {v}" for k, v in params.items())
    path.write_text(
        "workload:\n"
        "  init: pipecheck_test_pipelines:init\n"
        "  train_step: pipecheck_test_pipelines:train_step\n"
        f"  dataset: pipecheck_test_pipelines:{dataset}\n"
        "  batch: pipecheck_test_pipelines:batch\n"
        f"params: {{{items}}}\n"
    )
    return str(path)


@pytest.mark.timing
def test_demo_sweep_json_and_per_example_stages_are_the_slow_ones(tmp_path):
    out = tmp_path / "dl.json"
    marker = uuid.uuid4().hex
    proc = run_cli("dataloader", "--workers", "0,1", "--batches", "20", "--json", str(out),
                   env=_env(marker))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["kind"] == "dataloader" and data["config"]["workload"] == "demo"
    assert skeleton_problems("dataloader-demo", proc.stdout) == []  # docs/dataloader.md
    assert "jax" in data["env"]
    assert [(r["settings"]["workers"], r["settings"]["threads"])
            for r in data["results"]] == [(0, 1), (1, 1)]
    for r in data["results"]:
        bt = r["batch_time"]
        samples = decode_array(bt["samples_s"], "samples_s")
        assert bt["n"] == 20 and samples.size == 20
        assert bt["median_s"] > 0 and bt["p99_s"] >= bt["p90_s"] >= bt["median_s"]
        # Throughput leaves out the first batch: timed batches over their summed time.
        assert r["batches_per_s"] == pytest.approx(20 / samples.sum(), rel=1e-9)
        assert r["examples_per_s"] == pytest.approx(8 * r["batches_per_s"], rel=1e-9)
        assert r["tokens_per_s"] == pytest.approx(8 * 128 * r["batches_per_s"], rel=1e-9)
        assert r["first_batch_s"] > 0
        timed = [s for s in r["stages"] if s["n"] > 0]
        slowest = max(timed, key=lambda s: s["wait_ratio"])
        # Per-example work (reading a record, shuffling, tokenize+pack: about 0.2 ms each
        # here, which of them leads depends on the machine's disk and CPU) dominates; the
        # batching stage, 8 examples at a time, never does.
        assert any(name in slowest["name"] for name in
                   ("TokenizeAndPack", "SourceMapDataset", "ShuffleMapDataset")), r["stages"]
        assert any("TokenizeAndPack" in s["name"] for s in timed), r["stages"]
    workers_row = data["results"][1]
    assert {s["where"] for s in workers_row["stages"] if "TokenizeAndPack" in s["name"]} == \
        {"workers"}
    for r in data["results"]:  # the report names the stage the record finds slowest
        slowest = max((s for s in r["stages"] if s["n"] > 0), key=lambda s: s["wait_ratio"])
        knobs = r["settings"]
        assert f"workers={knobs['workers']} threads={knobs['threads']}: slowest stage " \
               f"{slowest['name']}" in proc.stdout, proc.stdout
    assert leftover(marker) == []


LOAD_S = 0.080
"""The calibrated loader's sleep per batch in the worker sweep."""


@pytest.mark.timing
def test_calibrated_sweep_batch_time_falls_with_workers(tmp_path):
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--set", "workload=calibrated", "--set",
                   f"load_ms={LOAD_S * 1000:g}", "--workers", "1,2,4", "--batches", "40",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["results"]
    # Mean batch time (1 / batches_per_s). With several workers in lockstep the batches
    # arrive in bursts, so the per-batch median alone does not show the rate.
    mean = {r["settings"]["workers"]: 1.0 / r["batches_per_s"] for r in rows}
    # Latency-bound (sleeping) loader: ~80 / workers ms, even with more workers than cores.
    assert 1.5 < mean[1] / mean[2] < 2.6, mean
    assert 1.4 < mean[2] / mean[4] < 2.6, mean
    assert mean[1] >= 0.95 * LOAD_S, mean  # one worker cannot beat its own sleep
    for r in rows:
        assert r["batch_time"]["mean_s"] == pytest.approx(mean[r["settings"]["workers"]], rel=1e-9)
        # The first batch (worker spawn) is reported apart and costs more than a batch.
        assert r["first_batch_s"] > mean[r["settings"]["workers"]]
    assert skeleton_problems("dataloader-calibrated", proc.stdout) == []  # docs/dataloader.md


def test_a_short_run_frees_the_batches_its_workers_had_ready():
    # 5 batches: the worker has more written to shared memory when the run stops reading.
    # Those are freed at clean-up, not left to the resource tracker's "leaked shared_memory
    # objects" warning at exit (and, if the run is killed, in /dev/shm).
    proc = run_cli("dataloader", "--set", "workload=calibrated", "--workers", "1",
                   "--batches", "5")
    assert proc.returncode == 0, proc.stderr
    assert "leaked" not in proc.stderr, proc.stderr


def test_worker_that_raises_ends_the_run_with_its_message(tmp_path):
    marker = uuid.uuid4().hex
    # Another process's shared memory on the same machine (a peer host's pipeline, any Grain
    # user): the failed run reclaims its own workers' segments, never this one.
    bystander = shared_memory.SharedMemory(create=True, size=1024)
    try:
        proc = run_cli("dataloader", "--config",
                       user_config(tmp_path, "failing_dataset", fail_at=5),
                       "--workers", "2", "--batches", "20", env=_env(marker), timeout=120)
        shared_memory.SharedMemory(name=bystander.name).close()  # still there
    finally:
        bystander.close()
        bystander.unlink()
    assert proc.returncode == 5, proc.stderr  # an error in the user's code
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    line = next(i for i, text in enumerate((HERE / "pipecheck_test_pipelines.py").read_text()
                                           .splitlines(), 1) if "cannot parse record" in text)
    assert lines[0] == (
        f"pipecheck: error: dataset (tests/integration/pipecheck_test_pipelines.py:{line}) "
        "raised ValueError: cannot parse record 5: unexpected end of data "
        "(in the input pipeline, workers=2, threads=1)")
    assert "Traceback" not in proc.stderr
    assert leftover(marker) == []


@pytest.mark.parametrize("workers,threads", [(2, 1), (0, 1)])
def test_a_pipeline_that_stops_producing_is_stopped_by_timeout(tmp_path, workers, threads):
    marker = uuid.uuid4().hex
    # the transform sleeps for an hour: a run that is not stopped raises TimeoutExpired
    proc = run_cli("dataloader", "--config", user_config(tmp_path, "hanging_dataset", hang_at=3),
                   "--workers", str(workers), "--threads", str(threads), "--batches", "20",
                   "--timeout", "3", env=_env(marker), timeout=120)
    assert proc.returncode == 4, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert "produced no batch for 3 s" in lines[0] and "--timeout" in lines[0]
    assert leftover(marker) == []


def read_until(stream, text, timeout_s):
    """Lines of ``stream`` up to the first one containing ``text``, read in a thread so a
    child that never prints it fails the test instead of hanging it."""
    lines: list[str] = []
    found = threading.Event()

    def pump():
        for line in stream:
            lines.append(line)
            if text in line:
                break
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    if not found.wait(timeout_s):
        raise AssertionError(f"no {text!r} on stderr within {timeout_s} s: {''.join(lines)}")
    return lines


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_run_and_its_workers(tmp_path):
    marker = uuid.uuid4().hex
    env = dict(os.environ)
    env.setdefault("PIPECHECK_DATA_DIR", str(REPO / ".pytest_cache" / "pipecheck_data"))
    env.update(_env(marker))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipecheck", "dataloader", "--set", "workload=calibrated",
         "--set", "load_ms=30", "--workers", "2", "--batches", "100000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
        # A run started from a background job inherits SIGINT ignored, and Python then
        # installs no KeyboardInterrupt handler: reset it, as a terminal's Ctrl-C finds it.
        preexec_fn=_sigint_default)
    try:
        assert proc.stderr is not None
        seen = read_until(proc.stderr, "first batch after", timeout_s=120)  # batches flow
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert len(workers) >= 2, seen
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)  # the rest of stderr, with a deadline
    finally:
        if proc.poll() is None:  # a failed test must not leave the run's workers behind
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert error_lines((proc.returncode, err)) == ["pipecheck: interrupted"], err
    assert leftover(marker) == []


def test_missing_tfds_data_dir_is_one_line(tmp_path):
    missing = tmp_path / "nowhere"
    proc = run_cli("dataloader", "--set", "source=tfds:imdb_reviews", "--set",
                   f"data_dir={missing}", "--batches", "2")
    assert proc.returncode == 3
    lines = error_lines(proc)
    assert len(lines) == 1 and str(missing) in lines[0], proc.stderr


def test_missing_array_record_path_is_one_line(tmp_path):
    proc = run_cli("dataloader", "--set", f"source={tmp_path / 'x.array_record'}",
                   "--batches", "2")
    assert proc.returncode == 3
    lines = error_lines(proc)
    assert len(lines) == 1 and "no ArrayRecord file at" in lines[0], proc.stderr


def _build_small_corpus(root: pathlib.Path) -> pathlib.Path:
    from pipecheck.data import demo_text

    return demo_text.ensure_corpus(40, 0, str(root), progress=False)


def test_corrupt_demo_corpus_names_the_path_and_the_fix(tmp_path):
    corpus = _build_small_corpus(tmp_path)
    shard = next((corpus / "pipecheck_demo_text" / "1.0.0").glob("*.array_record-*"))
    shard.write_bytes(shard.read_bytes()[:200])
    proc = run_cli("dataloader", "--set", "num_docs=40", "--set", f"data_dir={tmp_path}",
                   "--batches", "2")
    assert proc.returncode == 3, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert f"the demo corpus in {corpus} is corrupt" in lines[0]
    assert f"rm -rf {corpus}" in lines[0]


def test_incomplete_demo_corpus_is_rebuilt(tmp_path):
    from pipecheck.data import demo_text

    corpus = _build_small_corpus(tmp_path)
    info = corpus / "pipecheck_demo_text" / "1.0.0" / "dataset_info.json"
    info.unlink()
    assert not demo_text.is_complete(corpus)
    assert demo_text.ensure_corpus(40, 0, str(tmp_path), progress=False) == corpus
    assert demo_text.is_complete(corpus)
    assert len(demo_text.open_source(40, 0, str(tmp_path), progress=False)) == 40


def test_other_sources_tfds_by_name_and_array_record_path(tmp_path):
    from array_record.python.array_record_module import ArrayRecordWriter

    corpus = _build_small_corpus(tmp_path)
    out = tmp_path / "no_put.json"
    proc = run_cli("dataloader", "--set", "source=tfds:pipecheck_demo_text", "--set",
                   f"data_dir={corpus}", "--batches", "3", "--no-device-put",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    # the batches were timed without moving them to the devices, and the record says so
    assert json.loads(out.read_text())["device_put"] is False
    assert "without device_put" in proc.stdout and "with device_put" not in proc.stdout
    path = tmp_path / "docs.array_record"
    writer = ArrayRecordWriter(str(path), "group_size:1")
    for i in range(30):
        writer.write(f"Document {i}: some text to tokenize.".encode())
    writer.close()
    out = tmp_path / "put.json"
    proc = run_cli("dataloader", "--set", f"source={path}", "--batches", "3", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["device_put"] is True  # the default moves them
    assert "with device_put" in proc.stdout
    assert f"source {path}" in proc.stdout
