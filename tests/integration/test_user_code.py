"""Users' own code, run as a user runs it: entry points given as file paths outside the
repository and off ``sys.path``, with Grain worker processes on (spawned), through the CLI
in a fresh process."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable

from ..conftest import REPO, run_cli

USER_MODEL = textwrap.dedent('''
    import grain
    import jax
    import jax.numpy as jnp
    import numpy as np

    from user_helpers import features  # a sibling module, imported as `python file.py` would


    def init(config):
        return {"w": np.zeros((8, 1), np.float32)}


    @jax.jit
    def train_step(state, batch):
        def loss_fn(p):
            return jnp.mean((batch["x"] @ p["w"])[:, 0] - batch["y"]) ** 2

        loss, g = jax.value_and_grad(loss_fn)(state)
        return jax.tree.map(lambda p, d: p - 0.1 * d, state, g), {"loss": loss}


    class MakeBatch:
        def __init__(self, batch_size):
            self.batch_size = batch_size

        def __call__(self, index):
            x = features(index, self.batch_size)
            return {"x": x, "y": x.sum(axis=1)}


    def dataset(config):
        return grain.MapDataset.range(1 << 20).map(MakeBatch(config["batch_size"]))
''')

USER_HELPERS = textwrap.dedent('''
    import numpy as np


    def features(index, batch_size):
        rng = np.random.default_rng(index)
        return rng.standard_normal((batch_size, 8)).astype(np.float32)
''')


def user_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """A user's project: model.py and its sibling helper, outside the repo and sys.path."""
    d = tmp_path / "project"
    d.mkdir()
    (d / "model.py").write_text(USER_MODEL)
    (d / "user_helpers.py").write_text(USER_HELPERS)
    return d


def file_config(tmp_path: pathlib.Path, model: pathlib.Path) -> pathlib.Path:
    cfg = tmp_path / "user.yml"
    cfg.write_text(
        "workload:\n"
        + "".join(f"  {role}: {model}:{role}\n" for role in ("init", "train_step", "dataset"))
        + "batch_size: 16\n"
    )
    return cfg


def test_file_entry_points_work_with_worker_processes(tmp_path):
    model = user_dir(tmp_path) / "model.py"
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--config", str(file_config(tmp_path, model)),
                   "--workers", "0,2", "--batches", "8", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [s["settings"]["workers"] for s in data["results"]] == [0, 2]
    assert all(s["examples_per_batch"] == 16 for s in data["results"])


def test_file_entry_points_with_a_relative_path_under_compare(tmp_path):
    user_dir(tmp_path)  # run from tmp_path: the file's directory is not on sys.path
    cfg = tmp_path / "user.yml"
    cfg.write_text("workload:\n"
                   + "".join(f"  {r}: project/model.py:{r}\n"
                             for r in ("init", "train_step", "dataset"))
                   + "batch_size: 16\n")
    out = tmp_path / "c.json"
    proc = run_cli("compare", "--config", str(cfg), "--workers", "1", "--steps", "12",
                   "--target-steps", "5", "--batches", "5", "--quiet", "--json", str(out),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["tuning"]["chosen"]["workers"] == 1
    assert data["verdict"]


def test_shipped_example_dataloader_with_workers(tmp_path):
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--config", "configs/user-example.yml", "--workers", "0,2",
                   "--batches", "8", "--json", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [s["settings"]["workers"] for s in json.loads(out.read_text())["results"]] == [0, 2]


def test_shipped_example_compare_with_workers(tmp_path):
    out = tmp_path / "c.json"
    # The search may stop at 0 workers for this fast pipeline: give it worker counts to try.
    proc = run_cli("compare", "--config", "configs/user-example.yml", "--workers", "0,2",
                   "--steps", "20", "--target-steps", "20", "--batches", "10",
                   "--quiet", "--json", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert sorted(s["settings"]["workers"] for s in data["loader"]) == [0, 2], data["loader"]


# --- exceptions in the user's code: one line, exit 5, --traceback for the stack -------------
FAILING_MODEL = textwrap.dedent('''
    import grain
    import jax.numpy as jnp
    import numpy as np

    FAIL_STEP = False


    def check(config, where):
        if config["params"].get("fail") == where:
            raise ValueError(f"bad {where} setting")  # FAILS HERE


    def init(config):
        check(config, "init")
        return {"w": np.zeros((8, 1), np.float32)}


    def train_step(state, batch):
        w = state["w"].T if FAIL_STEP else state["w"]
        pred = batch["x"] @ w  # STEP
        return state, {"loss": jnp.mean(pred)}


    class MakeBatch:
        def __init__(self, config):
            self.fail_at = config["params"].get("fail_at", -1)

        def __call__(self, i):
            if i == self.fail_at:
                raise ValueError(f"cannot parse record {i}")  # TRANSFORM
            return {"x": np.ones((16, 8), np.float32)}


    def dataset(config):
        check(config, "dataset")
        return grain.MapDataset.range(1 << 20).map(MakeBatch(config))
''')


def line_of(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def failing_project(tmp_path: pathlib.Path, fail_step: bool = False, **params) -> pathlib.Path:
    """model.py and a config in tmp_path (the directory the CLI runs in)."""
    source = FAILING_MODEL.replace("FAIL_STEP = False", f"FAIL_STEP = {fail_step}")
    (tmp_path / "model.py").write_text(source)
    items = ", ".join(f"{k}: {v}" for k, v in params.items())
    (tmp_path / "user.yml").write_text(
        "workload:\n"
        + "".join(f"  {r}: model.py:{r}\n" for r in ("init", "train_step", "dataset"))
        + f"batch_size: 16\nparams: {{{items}}}\n")
    return tmp_path / "model.py"


def stderr_lines(proc) -> list[str]:
    """stderr without progress lines (``pipecheck: ...`` other than errors) and absl logs."""
    return [ln for ln in proc.stderr.splitlines()
            if ln.strip() and not ln.startswith(("W0", "I0", "WARNING:absl:"))
            and (ln.startswith("pipecheck: error") or not ln.startswith("pipecheck: "))]


def test_an_exception_in_init_is_one_line(tmp_path):
    model = failing_project(tmp_path, fail="init")
    proc = run_cli("synthetic", "--config", "user.yml", "--steps", "3", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    line = line_of(model.read_text(), "FAILS HERE")
    assert stderr_lines(proc) == [
        f"pipecheck: error: init (model.py:{line}) raised ValueError: bad init setting"]


def test_traceback_shows_the_whole_stack(tmp_path):
    model = failing_project(tmp_path, fail="init")
    proc = run_cli("synthetic", "--config", "user.yml", "--steps", "3", "--traceback",
                   cwd=tmp_path)
    assert proc.returncode == 5
    assert "Traceback (most recent call last)" in proc.stderr
    assert f'model.py", line {line_of(model.read_text(), "FAILS HERE")}, in check' \
        in proc.stderr
    assert ', in init\n' in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("pipecheck: error: init (model.py")


def test_an_exception_in_the_train_step_is_one_line(tmp_path):
    model = failing_project(tmp_path, fail_step=True)
    proc = run_cli("synthetic", "--config", "user.yml", "--steps", "3", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    (line,) = stderr_lines(proc)
    assert line.startswith(f"pipecheck: error: train_step (model.py:"
                           f"{line_of(model.read_text(), '# STEP')}) raised TypeError: ")


def test_an_exception_in_the_dataset_entry_point_is_one_line(tmp_path):
    model = failing_project(tmp_path, fail="dataset")
    proc = run_cli("dataloader", "--config", "user.yml", "--batches", "3", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert stderr_lines(proc) == [
        f"pipecheck: error: dataset (model.py:{line_of(model.read_text(), 'FAILS HERE')}) "
        "raised ValueError: bad dataset setting"]


PREVIOUS_CLOUDPICKLE = os.environ.get("PIPECHECK_PREVIOUS_CLOUDPICKLE", "")
"""A folder holding cloudpickle 3.1.2 (the release before code pickled by value lost its file
name), put ahead of the installed one; .ci/run unpacks it there."""


@pytest.mark.parametrize("cloudpickle_dir", [
    pytest.param("", id="installed-cloudpickle"),
    pytest.param(PREVIOUS_CLOUDPICKLE, id="cloudpickle-3.1.2", marks=pytest.mark.skipif(
        not PREVIOUS_CLOUDPICKLE, reason="PIPECHECK_PREVIOUS_CLOUDPICKLE is not set (.ci/run "
        "unpacks cloudpickle 3.1.2 there)")),
])
def test_an_exception_in_a_grain_worker_names_the_users_line(tmp_path, cloudpickle_dir):
    model = failing_project(tmp_path, fail_at=6)
    env = {"PYTHONPATH": cloudpickle_dir + os.pathsep + os.environ.get("PYTHONPATH", "")} \
        if cloudpickle_dir else None
    proc = run_cli("dataloader", "--config", "user.yml", "--workers", "2", "--batches", "20",
                   cwd=tmp_path, env=env)
    if cloudpickle_dir:
        assert check_cloudpickle_version(cloudpickle_dir, tmp_path) == "3.1.2"
    assert proc.returncode == 5, proc.stderr
    assert stderr_lines(proc) == [
        f"pipecheck: error: dataset (model.py:{line_of(model.read_text(), '# TRANSFORM')}) "
        "raised ValueError: cannot parse record 6 (in the input pipeline, workers=2, threads=1)"]


def check_cloudpickle_version(folder: str, cwd: pathlib.Path) -> str:
    """The cloudpickle version a process with ``folder`` first on PYTHONPATH imports."""
    env = dict(os.environ, PYTHONPATH=folder + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = "import cloudpickle; print(cloudpickle.__version__)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=cwd, check=True).stdout.strip()


def test_an_exception_in_compares_real_data_run_is_one_line(tmp_path):
    # The loader search reads a few dozen batches per setting at most; the real-data run
    # (130 steps, each a fresh pass from record 0) reaches record 120.
    model = failing_project(tmp_path, fail_at=120)
    proc = run_cli("compare", "--config", "user.yml", "--workers", "1", "--batches", "5",
                   "--steps", "130", "--target-steps", "5", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    err = proc.stderr.splitlines()
    started = next(i for i, text in enumerate(err) if text.startswith("pipecheck: [3/4] real-data"))
    (line,) = [text for text in err[started:] if text.startswith("pipecheck: error:")]
    assert err[-1] == line and "Traceback" not in proc.stderr  # after the real-data run began
    assert line.startswith(
        f"pipecheck: error: dataset (model.py:{line_of(model.read_text(), '# TRANSFORM')}) "
        "raised ValueError: cannot parse record 120 (in the input pipeline, workers=1, "), line


# --- Flax NNX and grain.DataLoader, as the Flax and Grain tutorials write them ----------------
NNX_CONFIG = "configs/nnx-example.yml"
"""examples/nnx_train.py: NNX objects updated in place; the pipeline is a grain.DataLoader."""


def test_nnx_workload_synthetic_runs_the_step_unedited(tmp_path):
    out = tmp_path / "s.json"
    proc = run_cli("synthetic", "--config", NNX_CONFIG, "--steps", "6", "--json", str(out),
                   cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["compile"]["train_step_compiles"] == 1
    losses = [s.loss for s in StepTable.from_json(StepRecord, data["steps"])]  # by column
    assert losses[-1] < losses[0]  # the optimizer updated the model in place


def test_data_loader_pipeline_under_dataloader_with_workers(tmp_path):
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--config", NNX_CONFIG, "--workers", "0,2", "--batches", "8",
                   "--json", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    assert [r["settings"]["workers"] for r in rows] == [0, 2]
    assert all(r["examples_per_batch"] == 64 for r in rows)
    assert all(any("grain.DataLoader" in w for w in r["warnings"]) for r in rows)


def test_nnx_and_data_loader_under_compare(tmp_path):
    out = tmp_path / "c.json"
    proc = run_cli("compare", "--config", NNX_CONFIG, "--workers", "0,1", "--steps", "12",
                   "--target-steps", "5", "--batches", "5", "--quiet", "--json", str(out),
                   cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert sorted(s["settings"]["workers"] for s in data["loader"]) == [0, 1]
    assert len(StepTable.from_json(StepRecord, data["steps"])) == 12 and data["verdict"]


def test_nnx_training_script_under_the_monitor(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO / "examples" / "nnx_train.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "nnx_run.json").read_text())
    assert run["kind"] == "monitor" and run["total_steps"] == 60
    assert run["compile"]["train_step_compiles"] == 1
    assert "pipecheck monitor: your training loop" in proc.stdout


# --- a MaxText-shaped pipeline: its own ReadOptions, first-fit packing, inputs/targets -------
MAXTEXT_LIKE = REPO / "tests" / "data" / "users" / "maxtext_shaped.py"
"""The user's model and pipeline file (read prefetch 64 when the config gives none)."""


def maxtext_config(tmp_path: pathlib.Path) -> pathlib.Path:
    d = tmp_path / "lm"
    d.mkdir()
    (d / "maxtext_like.py").write_text(MAXTEXT_LIKE.read_text())
    cfg = tmp_path / "lm.yml"
    cfg.write_text("workload:\n"
                   + "".join(f"  {r}: {d / 'maxtext_like.py'}:{r}\n"
                             for r in ("init", "train_step", "dataset"))
                   + f"batch_size: 8\nparams: {{corpus: {d / 'corpus.array_record'}}}\n")
    return cfg


def test_a_pipeline_with_its_own_read_options_is_reported_as_it_is(tmp_path):
    """ArrayRecord of JSON, parse and tokenize, to_iter_dataset(grain.ReadOptions(
    num_threads=4, ...)), Grain's first-fit packing, batch: the report gives the pipeline's
    own read threads and prefetch (not pipecheck's defaults), says only workers and buffers
    were tuned, names the workload by its file, and counts the tokens of ``inputs``."""
    cfg = maxtext_config(tmp_path)
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--config", str(cfg), "--workers", "1", "--batches", "8",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    [setting] = data["results"]
    assert (setting["settings"]["workers"], setting["settings"]["threads"],
            setting["settings"]["prefetch"]) == (1, 4, 64)
    assert setting["tokens_per_s"] and setting["tokens_per_s"] > setting["examples_per_s"]
    header = proc.stdout.splitlines()[0]
    assert f"(workload {tmp_path / 'lm' / 'maxtext_like.py'};" in header, header
    assert ("the pipeline sets its own read options (grain.ReadOptions(num_threads=4, "
            "prefetch_buffer_size=64) in its to_iter_dataset)") in proc.stdout
    assert "tunes only the worker processes and their buffers" in proc.stdout

    out = tmp_path / "c.json"
    proc = run_cli("compare", "--config", str(cfg), "--workers", "1", "--steps", "5",
                   "--target-steps", "5", "--batches", "3", "--quiet", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [(s["settings"]["threads"], s["settings"]["prefetch"])
            for s in data["loader"]] == [(4, 64)]
    assert data["tuning"]["chosen"]["threads"] == 4
    assert any("sets its own read options" in w for w in data["warnings"]), data["warnings"]


# --- a pipeline that runs its own Grain workers (mp_prefetch) ---------------------------------
OWN_WORKERS = textwrap.dedent('''
    """A user's pipeline with its own ReadOptions and its own mp_prefetch(num_workers=2)."""
    import os
    import pathlib

    import grain
    import jax
    import jax.numpy as jnp
    import numpy as np


    class Note:
        """worker_init_fn: each worker writes its pid, its parent's and Grain's count."""

        def __init__(self, folder):
            self.folder = folder

        def __call__(self, index, count):
            line = f"{os.getppid()} {index} {count}"
            pathlib.Path(self.folder, f"worker-{os.getpid()}").write_text(line)


    class MakeBatch(grain.transforms.Map):
        def map(self, i):
            x = np.full((8, 4), i % 7, np.float32)
            return {"x": x, "y": x.sum(axis=1)}


    def dataset(config):
        params = config["params"]
        pathlib.Path(params["notes"], f"main-{os.getpid()}").write_text("")
        ds = (grain.MapDataset.range(1 << 20).map(MakeBatch())
              .to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)))
        if params["workers"]:
            ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=params["workers"]),
                                worker_init_fn=Note(params["notes"]))
        return ds


    def init(config):
        return {"w": np.zeros((4,), np.float32)}


    @jax.jit
    def train_step(state, batch):
        loss = jnp.mean((batch["x"] @ state["w"] - batch["y"]) ** 2)
        return state, {"loss": loss}
''')


def own_workers_config(tmp_path: pathlib.Path, workers: int = 2) -> pathlib.Path:
    """The user's file and config outside the repo; workers' notes in ``tmp_path/notes``."""
    d = tmp_path / "own"
    d.mkdir()
    (d / "pipeline.py").write_text(OWN_WORKERS)
    (tmp_path / "notes").mkdir()
    cfg = tmp_path / "own.yml"
    cfg.write_text("workload:\n"
                   + "".join(f"  {r}: {d / 'pipeline.py'}:{r}\n"
                             for r in ("init", "train_step", "dataset"))
                   + f"batch_size: 8\nparams: {{notes: {tmp_path / 'notes'}, "
                   f"workers: {workers}}}\n")
    return cfg


def worker_notes(tmp_path: pathlib.Path) -> tuple[set[int], dict[int, tuple[int, int, int]]]:
    """The pids of the processes that built the dataset, and per worker pid its parent's
    pid, its index and Grain's worker count, as the workers wrote them."""
    notes = tmp_path / "notes"
    mains = {int(p.name.split("-")[1]) for p in notes.glob("main-*")}
    workers = {int(p.name.split("-")[1]): tuple(map(int, p.read_text().split()))
               for p in notes.glob("worker-*")}
    return mains, workers  # type: ignore[return-value]


def gone(pids: set[int], wait_s: float = 60.0) -> bool:
    """Every process in ``pids`` has exited (polled: the kernel reaps them shortly after;
    the answer comes as soon as they are, so a generous wait costs a quiet machine
    nothing)."""
    import os
    import time

    deadline = time.monotonic() + wait_s
    while True:
        alive = set()
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.add(pid)
            except ProcessLookupError:
                pass
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.1)


def test_a_pipeline_with_its_own_workers_runs_them_alone_and_says_so(tmp_path):
    """mp_prefetch(num_workers=2) in the user's pipeline, asked for --workers 2: exactly its
    own 2 workers run, each a child of pipecheck's process (none nested in a worker of
    pipecheck's), the record and the report give its own workers and buffer, and say that
    pipecheck cannot tune them."""
    cfg = own_workers_config(tmp_path)
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--config", str(cfg), "--workers", "2", "--batches", "8",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    [setting] = json.loads(out.read_text())["results"]
    knobs = setting["settings"]
    assert (knobs["workers"], knobs["per_worker_buffer"]) == (2, 1)  # Grain's default 1
    assert (knobs["threads"], knobs["prefetch"]) == (2, 4)
    assert setting["resources"]["workers_seen"] == 2
    mains, workers = worker_notes(tmp_path)
    assert workers, "the pipeline's workers never started"
    assert {ppid for ppid, _, _ in workers.values()} <= mains  # no worker inside a worker
    assert {count for _, _, count in workers.values()} == {2}
    assert gone(set(workers))
    note = ("the pipeline runs its own worker processes (mp_prefetch(grain."
            "MultiprocessingOptions(num_workers=2, per_worker_buffer_size=1))) and its read "
            "options (grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)")
    assert any(w.startswith(note) for w in setting["warnings"]), setting["warnings"]
    assert note in " ".join(proc.stdout.split())
    assert "cannot tune what the pipeline fixes" in " ".join(proc.stdout.split())


def test_options_a_pipeline_fixes_itself_are_refused_in_one_line(tmp_path):
    cfg = own_workers_config(tmp_path)
    proc = run_cli("dataloader", "--config", str(cfg), "--workers", "3", "--batches", "8")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert stderr_lines(proc) == [
        "pipecheck: error: --workers 3 cannot change this pipeline's worker processes: it "
        "calls mp_prefetch(grain.MultiprocessingOptions(num_workers=2, "
        "per_worker_buffer_size=1)) itself; drop --workers, or remove mp_prefetch from the "
        "pipeline to let pipecheck set the workers"]
    _, workers = worker_notes(tmp_path)  # started for the workload's example batch
    assert workers and gone(set(workers))

    (tmp_path / "threads").mkdir()
    cfg = own_workers_config(tmp_path / "threads", workers=0)  # its ReadOptions only
    proc = run_cli("dataloader", "--config", str(cfg), "--threads", "4", "--batches", "8")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert stderr_lines(proc) == [
        "pipecheck: error: --threads 4 cannot change this pipeline's read threads: it sets "
        "grain.ReadOptions(num_threads=2, prefetch_buffer_size=4) in its own to_iter_dataset; "
        "drop --threads, or change the ReadOptions in the pipeline (pipecheck sets read "
        "options only on a MapDataset it reads itself)"]
