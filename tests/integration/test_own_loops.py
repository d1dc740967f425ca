"""Real loops as people write them (tutorial shapes), each a script of tests/data/own_loops/
copied into a directory outside the repository (off ``sys.path``) and run in a subprocess
with the Monitor added as docs/monitor.md shows; each test reads the record and checks its
verdict, the lines it names (sync sites, findings' locations, by file:line of the script)
and the ones it must not name.

Every workload is chosen so that its verdict holds with a wide margin (compute 10x the input
cost, or the reverse), on a loaded machine too: the tests judge measured times only through
such relations."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from pipecheck.analysis.verdict import HARMLESS_SYNC_SHARE
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.conftest import REPO, cli_env

OWN_LOOPS = REPO / "tests" / "data" / "own_loops"
STEPS = 50
"""Steps of every loop but the Grain one (at least 40 steady: a verdict needs 10)."""


def copy_loop(tmp: pathlib.Path, name: str) -> pathlib.Path:
    """The loop script, copied into a directory of its own outside the repository."""
    where = tmp / "user_code"
    where.mkdir(exist_ok=True)
    script = where / f"{name}.py"
    shutil.copy(OWN_LOOPS / f"{name}.py", script)
    return script


def run_script(tmp: pathlib.Path, script: pathlib.Path, *args: str
               ) -> subprocess.CompletedProcess[str]:
    out = tmp / f"{script.stem}.json"
    return subprocess.run([sys.executable, str(script), str(out), *args], capture_output=True,
                          text=True, timeout=240, env=cli_env(), cwd=tmp)


def run_loop(tmp: pathlib.Path, name: str, *args: str) -> tuple[MonitorResult, pathlib.Path]:
    """The loop's record and the path of the script that ran."""
    script = copy_loop(tmp, name)
    r = run_script(tmp, script, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    return store.load(tmp / f"{name}.json", expect=MonitorResult), script


def line_of(script: pathlib.Path, marker: str) -> str:
    """``file:line`` of the line of ``script`` marked ``# MARKER``."""
    for n, line in enumerate(script.read_text().splitlines(), start=1):
        if f"# {marker}" in line:
            return f"{script}:{n}"
    raise AssertionError(f"marker {marker} not in {script}")


def host_syncs(res: MonitorResult) -> list[str]:
    return [f.location or "" for f in res.findings if f.kind == "host-sync"]


def steady_step_s(res: MonitorResult) -> float:
    """The wall time per step, compile left out (the step the gains are a share of)."""
    return (res.wall_s - res.breakdown.seconds("compile")) / res.total_steps


def device_s(res: MonitorResult) -> float:
    return res.breakdown.seconds("compute") + res.breakdown.seconds("sync stall")


@pytest.mark.timing
def test_flax_nnx_step_is_compute_bound(tmp_path: pathlib.Path) -> None:
    """nnx.Module, nnx.Optimizer, an nnx.jit step returning its loss; data in memory."""
    res, _ = run_loop(tmp_path, "nnx_compute")
    assert res.verdict == "compute-bound", res.reason
    assert host_syncs(res) == [], res.findings
    assert not [s for s in res.user_sync_sites if s.share >= HARMLESS_SYNC_SHARE]
    assert device_s(res) > 10 * res.breakdown.seconds("data wait")
    assert res.total_steps == STEPS and res.step_time.summary.n >= 40
    assert res.compile is not None and res.compile.train_step_compiles == 1


@pytest.mark.timing
def test_params_only_step_with_loss_fn_and_no_loader(tmp_path: pathlib.Path) -> None:
    """A step returning only the new params, timed through ``Monitor(loss=lambda params:
    jnp.sum(params["w"]))``; ``mon.batches(range(n))`` stands in for a loader."""
    res, _ = run_loop(tmp_path, "params_only", "loss")
    assert res.verdict == "compute-bound", res.reason
    assert host_syncs(res) == [], res.findings
    assert [(s.index, s.step) for s in res.loader_starts] == [(0, 0)]
    assert res.breakdown.share("data wait") < 0.02
    assert res.total_steps == STEPS and res.step_time.summary.n >= 40
    losses = [s.loss for s in res.steps if s.step > 0]
    assert losses and all(v is not None and abs(v) < 1e6 for v in losses)  # sum(w), read


def test_params_only_step_without_loss_fn_says_what_to_return(tmp_path: pathlib.Path) -> None:
    script = copy_loop(tmp_path, "params_only")
    r = run_script(tmp_path, script, "no-loss")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("pipecheck.errors.MonitorError: Monitor.step could not find the "
                           "loss in the step's output (dict with keys 'b', 'out', 'w')"), last
    assert "the step must return a scalar loss, (state, {'loss': loss})" in last
    assert "the loss a scalar (shape ())" in last
    assert "Monitor(loss=lambda params: jnp.sum(params['w']))" in last
    assert not (tmp_path / "params_only.json").exists()


@pytest.mark.timing
def test_grain_loader_iterated_again_each_epoch(tmp_path: pathlib.Path) -> None:
    """A grain.DataLoader with 2 workers, a new iterator each epoch in ``train_epoch(mon,
    ...)``, an eval span at each epoch's end: every pass is a loader start, the restarting
    steps are explained as such (not as the eval in the same step), the restarts are a
    finding and lead the gains."""
    res, _ = run_loop(tmp_path, "grain_epochs")
    epochs = res.config["epochs"]
    per_epoch = res.config["dataset_size"] // res.config["batch_size"]
    assert res.total_steps == epochs * per_epoch
    assert [s.index for s in res.loader_starts] == list(range(epochs))
    restarts = [s.step for s in res.loader_starts[1:]]
    assert restarts == [per_epoch * k - 1 for k in range(1, epochs)]  # the epoch's last step
    tags = {s.step: s.tags for s in res.steps}
    for step in restarts:
        assert "loader_start" in tags[step] and "eval" in tags[step], tags[step]
    causes = {a.step: a.cause for a in res.anomalies}
    assert [causes.get(step) for step in restarts] == ["loader start"] * len(restarts), \
        res.anomalies
    (finding,) = [f for f in res.findings if f.kind == "loader-restart"]
    assert finding.numbers["restarts"] == len(restarts)
    assert f"an eval span ran in the same step at {len(restarts)} of them" in finding.message
    # a worker start is ~1-2 s, a steady batch well under 10 ms
    starts = [s.wait_s for s in res.loader_starts]
    assert min(starts) > 20 * res.step_time.summary.median
    assert res.verdict == "input-bound", res.reason
    assert "in loader restarts" in res.reason
    # 3 restarts against 1 first start: one iterator over every epoch is the first gain,
    # above tuning a loader whose steady batch takes well under a millisecond
    assert res.gains and res.gains[0].change.startswith("one iterator over every epoch"), \
        res.gains
    assert host_syncs(res) == [], res.findings


@pytest.mark.timing
def test_pil_decoding_generator_is_input_bound_and_its_conversion_no_sync(
        tmp_path: pathlib.Path) -> None:
    """A generator decoding PNGs with PIL and ``np.array(img, dtype=np.float32)``: the
    conversion of a host value is host work, not a sync; decoding dominates."""
    images = tmp_path / "images"
    images.mkdir()
    res, script = run_loop(tmp_path, "pil_generator", str(images))
    conversion = line_of(script, "HOST-CONVERSION")
    assert all(s.location != conversion for s in res.sync_sites), res.sync_sites
    assert conversion not in host_syncs(res)
    assert host_syncs(res) == [], res.findings
    assert res.breakdown.seconds("data wait") > 5 * device_s(res)
    assert res.verdict == "input-bound", res.reason
    assert res.gains[0].kind == "loader-setting"


@pytest.mark.timing
def test_item_every_step_is_named_but_compute_bound(tmp_path: pathlib.Path) -> None:
    """``metrics["loss"].item()`` each step: the line is the sync, but the host has nothing
    to overlap with the device while it waits, so removing it buys little."""
    res, script = run_loop(tmp_path, "item_every_step")
    sync = line_of(script, "HOST-SYNC")
    assert res.user_sync_sites and res.user_sync_sites[0].location == sync, res.sync_sites
    assert ".item()" in res.user_sync_sites[0].code
    # each step's wait at the line is its sync stall, as the wall-time table files it
    charged = sum(s.spans.get("forced_sync", 0.0) for s in res.steps)
    assert charged == pytest.approx(res.breakdown.seconds("sync stall"), rel=0.1)
    assert charged > 10 * sum(s.spans.get("other", 0.0) for s in res.steps)
    assert sync in host_syncs(res)
    assert res.verdict == "compute-bound", res.reason
    (gain,) = [g for g in res.gains if g.kind == "sync" and sync in g.change] or [None]
    if gain is not None:  # listed only when it may buy 1% of a step
        assert gain.gain_s.low == 0.0
        assert gain.gain_s.high < 0.1 * steady_step_s(res), (gain, steady_step_s(res))


@pytest.mark.timing
def test_loss_read_one_step_late_costs_nothing(tmp_path: pathlib.Path) -> None:
    """Keep the step's metrics, ``float()`` them the next step: by then the Monitor's own
    lagged sync has waited for them."""
    res, script = run_loop(tmp_path, "lagged_read")
    lagged = line_of(script, "LAGGED-READ")
    assert lagged not in host_syncs(res), res.findings
    assert all(s.share < HARMLESS_SYNC_SHARE for s in res.sync_sites if s.location == lagged)
    assert any(s.internal for s in res.sync_sites)  # the wait is pipecheck's lagged sync
    assert res.verdict == "compute-bound", res.reason


@pytest.mark.timing
def test_print_of_a_device_array_is_a_sync_site(tmp_path: pathlib.Path) -> None:
    """``print(params["w"][0])`` each step waits for the step that made ``params``."""
    res, script = run_loop(tmp_path, "print_params")
    printed = line_of(script, "PRINT-SYNC")
    assert res.user_sync_sites and res.user_sync_sites[0].location == printed, res.sync_sites
    assert printed in host_syncs(res)
    # the print's own formatting is host work that could overlap the device once the print
    # reads the previous step's params: forced-sync when that may buy 10% of the loop's time
    assert res.verdict in ("forced-sync", "compute-bound"), res.reason
    if res.verdict == "forced-sync":
        assert printed in res.reason


@pytest.mark.timing
def test_grain_loader_fed_in_bursts_reports_its_wall_time_per_step(
        tmp_path: pathlib.Path) -> None:
    """A grain.DataLoader with 4 workers and a 3 ms-an-example decode feeding a cheap step:
    the loop waits for one batch and finds the next ones ready. The record's wall time per
    step over the steady window is the loop's own wall clock per step; the ready batches
    are in the steady state, not anomalies."""
    res, _ = run_loop(tmp_path, "grain_tutorial")
    began = json.loads((tmp_path / "grain_tutorial.json.times").read_text())
    assert res.total_steps == len(began) == 200
    assert res.verdict == "input-bound", res.reason
    wall = res.wall_per_step_s
    assert wall is not None and wall.low <= wall.value <= wall.high
    # the window: steps 1 .. 198 (step 0 waits for the workers to start, 199 drains); the
    # loop's clock read as each iteration began spans the same intervals
    own = (began[-1] - began[1]) / (len(began) - 2)
    assert abs(wall.value - own) < 0.15 * own, (wall, own)
    # the loop waits most of its time: its wall time per step is far above the step's compute
    assert wall.value > 5 * res.breakdown.seconds("compute") / res.total_steps
    fast = [a for a in res.anomalies if a.ratio < 1]
    assert fast == [], fast  # ready batches are not anomalies
    window = [s for s in res.steps if 0 < s.step < res.total_steps - 1]
    assert res.step_time.summary.n >= 0.9 * len(window), res.anomalies
    assert host_syncs(res) == [], res.findings
