"""``pipecheck profile`` on captures made live with the real jax.profiler, of a user's loop
in a file outside the repository and off sys.path (tests/data/profile_loop.py, copied):
a Python generator, Grain workers, a float(loss) sync at a known line; and committed
captures without step markers (the step picked, or the whole capture read)."""

from __future__ import annotations

import html as html_lib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from pipecheck.records import store
from tests.conftest import REPO

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

LOOP = REPO / "tests" / "data" / "profile_loop.py"


def capture(tmp: pathlib.Path, name: str, *args: str) -> pathlib.Path:
    """Run the user's loop (a copy in ``tmp``) under jax.profiler; return the capture dir."""
    loop = tmp / "user" / "train_loop.py"
    if not loop.exists():
        loop.parent.mkdir()
        shutil.copyfile(LOOP, loop)
    out = tmp / name
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, str(loop), str(out), "--steps", "25", *args],
                       capture_output=True, text=True, timeout=240, env=env, cwd=loop.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def profile(capture_dir: pathlib.Path, cwd: pathlib.Path, *args: str) -> tuple[dict, str]:
    out = capture_dir.parent / f"{capture_dir.name}.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "pipecheck", "profile", str(capture_dir),
                        "--json", str(out), *args],
                       capture_output=True, text=True, timeout=240, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text()), r.stdout


def sync_line(path: pathlib.Path) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                if "# FORCED-SYNC" in text)


def test_generator_sleeping_per_batch_is_input_bound(tmp_path: pathlib.Path) -> None:
    # what XProf calls "NOT input-bound ... 0.0%": a generator of 30 ms, 5 ms of compute
    cap = capture(tmp_path, "gen", "--load-ms", "30", "--compute-ms", "5")
    rec, report = profile(cap, tmp_path)
    assert rec["kind"] == "profile" and rec["verdict"] == "input-bound", report
    assert not rec["estimates"]["background_loader"]
    assert rec["estimates"]["loader"]["value"] > 2 * rec["estimates"]["compute"]["value"]
    assert "pipecheck profile: input-bound" in report


def test_forced_sync_names_the_users_line(tmp_path: pathlib.Path) -> None:
    # XProf: "NOT input-bound, 0.0%", nothing about the sync
    # equal loading and compute: a serialized step is twice the slower part, whatever the load
    cap = capture(tmp_path, "sync", "--load-ms", "30", "--compute-ms", "30", "--sync", "float")
    loop = tmp_path / "user" / "train_loop.py"
    rec, report = profile(cap, loop.parent)
    assert rec["verdict"] == "forced-sync", report
    (finding,) = [f for f in rec["findings"] if f["kind"] == "forced-sync"]
    assert finding["location"] == f"{loop}:{sync_line(loop)}"
    assert "float(loss)" in finding["message"]


def test_grain_workers_input_bound_with_a_harmless_sync(tmp_path: pathlib.Path) -> None:
    # a grain.DataLoader with a worker process, 45 ms a batch, 10 ms of compute and a
    # float(loss) each step: the worker loads during the sync and still makes the loop wait.
    # On a core shared with the worker (the timing tests run so, two at a time, each on one
    # core) compute read 14.4 ms [11.4, 20.1] and, with 30 ms a batch, the loader 31.4 ms
    # [19.3, 32.1]: too close to tell
    cap = capture(tmp_path, "grain", "--loader", "grain-workers", "--load-ms", "45",
                  "--compute-ms", "10", "--sync", "float")
    rec, report = profile(cap, tmp_path, "--source", str(tmp_path / "user"))
    assert rec["verdict"] == "input-bound", report
    assert rec["estimates"]["background_loader"]
    kinds = {f["kind"] for f in rec["findings"]}
    assert "harmless-sync" in kinds and "forced-sync" not in kinds


CAPTURES = REPO / "tests" / "data" / "captures"


def test_block_until_ready_loop_without_markers_picks_the_step(tmp_path: pathlib.Path) -> None:
    # issue 32: one jitted function called 10 times, loading 30 ms before each call and
    # jax.block_until_ready after it, no step markers: was refused without --step-fn
    cap = capture(tmp_path, "block", "--load-ms", "30", "--compute-ms", "30", "--sync", "block",
                  "--no-markers", "--steps", "10")
    loop = tmp_path / "user" / "train_loop.py"
    rec, report = profile(cap, loop.parent, "--html", str(tmp_path / "block.html"))
    assert rec["verdict"] == "forced-sync", report
    assert rec["picked_step"]["function"] == "train_step" and not rec["whole_capture"]
    assert rec["picked_step"]["executions"] == 10
    assert rec["config"]["steps_from"] == "jit_train_step on the device"
    said = ("steps: the repeating jitted function `train_step` (10 calls, 100% of the jitted "
            "device time), no step markers in the capture")
    assert said in report.splitlines()
    assert said in _text(tmp_path / "block.html")
    (finding,) = [f for f in rec["findings"] if f["kind"] == "forced-sync"]
    line = next(n for n, text in enumerate(loop.read_text().splitlines(), 1)
                if "# BLOCKING-SYNC" in text)
    assert finding["location"] == f"{loop}:{line}"
    assert "block_until_ready" in finding["message"]


def test_small_jitted_functions_without_markers_read_whole_as_host_bound(
        tmp_path: pathlib.Path) -> None:
    # issue 32: three small jitted functions dispatched back to back (each a third of the
    # device time, none the step), no markers: a whole-capture reading, host-bound (dispatch)
    cap = tmp_path / "small_fns.xplane.pb"
    shutil.copyfile(CAPTURES / "small_fns_no_markers.xplane.pb", cap)
    rec, report = profile(cap, tmp_path, "--html", str(tmp_path / "small.html"))
    assert rec["whole_capture"] and rec["picked_step"] is None, report
    assert rec["verdict"] == "host-bound" and rec["host_bound"]  # one answer, two readers
    assert not rec["steps"] and rec["config"]["steps_from"] == "the whole capture"
    lines = report.splitlines()
    assert lines[0] == "pipecheck profile: host-bound (dispatch)"
    assert lines[2].startswith("no steps found: whole-capture reading")
    assert "over the whole capture" in rec["reason"] and "400 jitted calls" in rec["reason"]
    assert [f["kind"] for f in rec["findings"]] == ["host-bound"]
    assert "no steps found: whole-capture reading" in _text(tmp_path / "small.html")
    loaded = store.load(tmp_path / "small_fns.xplane.pb.json")
    assert loaded.whole_capture and loaded.picked_step is None and loaded.steps == ()


def test_capture_without_markers_is_no_longer_refused(tmp_path: pathlib.Path) -> None:
    # it was: "the capture has no step markers; ... name the jitted train step with --step-fn"
    cap = tmp_path / "no_markers.xplane.pb"
    shutil.copyfile(CAPTURES / "no_markers.xplane.pb", cap)
    rec, report = profile(cap, tmp_path)
    assert "no step markers;" not in report and rec["verdict"] == "input-bound"
    assert rec["picked_step"]["function"] == "train_step"
    assert "steps: the repeating jitted function `train_step` (12 calls" in report


def _text(html: pathlib.Path) -> str:
    """An HTML page's text, tags dropped and entities read."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html.read_text()))


@pytest.mark.parametrize("args", [("--step-fn", "nope")])
def test_bad_step_fn_is_one_line(tmp_path: pathlib.Path, args: tuple[str, ...]) -> None:
    cap = REPO / "tests" / "data" / "captures" / "no_markers.xplane.pb"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "pipecheck", "profile", str(cap), *args],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "--step-fn nope: the capture holds 0 call(s)" in r.stderr


MONITOR_LOOP = '''
import sys, time
import jax, jax.numpy as jnp, numpy as np
from pipecheck import Monitor

@jax.jit
def train_step(w, x):
    h = jax.lax.fori_loop(0, 4, lambda _, a: jnp.tanh(a @ w), jnp.tile(x, (8, 1)))
    return w - 1e-6 * jnp.mean(h), {"loss": jnp.mean(h * h)}

def batches():
    while True:
        time.sleep(0.1)  # a slow reader; 100 ms, not 30: a busy host stretched compute to
                         # T [12, 33] ms, too close to decide against 30 ms of loading
        yield np.ones((64, 512), np.float32)

w = jnp.eye(512, dtype=jnp.float32) * 0.5
mon = Monitor(profile_steps=range(3, 23), profile_dir=sys.argv[1])
for step, x in enumerate(mon.batches(batches())):
    w, metrics = mon.step(train_step, w, x)
    if step == 25:
        break
mon.finish()
'''


def test_monitor_profile_steps_capture_reads_as_input_bound(tmp_path: pathlib.Path) -> None:
    loop = tmp_path / "user" / "monitored.py"
    loop.parent.mkdir()
    loop.write_text(MONITOR_LOOP)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, str(loop), str(tmp_path / "cap")], capture_output=True,
                       text=True, timeout=240, env=env, cwd=loop.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    rec, report = profile(tmp_path / "cap", tmp_path)
    loaded = store.load(tmp_path / "cap.json")
    steps = [s.step for s in loaded.steps]
    assert steps[0] == 3 and steps[-1] == 22  # the Monitor's own step markers, that window
    assert rec["verdict"] == "input-bound", report


def test_processes_capturing_each_name_the_straggler(tmp_path: pathlib.Path) -> None:
    # two jax.distributed processes on this machine, each capturing into its own folder;
    # process 1 loads 8x slower and every step all-reduces: process 1 is the straggler
    from .multihost import free_port, launched

    script = tmp_path / "user" / "mh.py"
    script.parent.mkdir()
    shutil.copyfile(REPO / "tests" / "data" / "profile_multihost_loop.py", script)
    port = str(free_port())
    cmds = [[sys.executable, str(script), str(tmp_path / "cap"), str(i), "2", port]
            for i in range(2)]
    with launched(tmp_path, cmds, cwd=script.parent) as run:
        codes = run.wait(240)
        assert codes == [0, 0], [run.stderr(i)[-1500:] for i in range(2)]
    rec, report = profile(tmp_path / "cap", tmp_path)
    assert [h["host"].split("/")[0] for h in rec["hosts"]] == ["process_0", "process_1"]
    assert rec["straggler"] is not None, report
    assert rec["straggler"]["hostname"].startswith("process_1")
    assert rec["verdict"] == "input-bound" and rec["env"]["host"].startswith("process_1")
