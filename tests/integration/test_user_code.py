"""Users' own code, run as a user runs it: entry points given as file paths outside the
repository and off ``sys.path``, with Grain worker processes on (spawned), through the CLI
in a fresh process."""

from __future__ import annotations

import json
import pathlib
import textwrap

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
    assert [s["workers"] for s in data["results"]] == [0, 2]
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
    assert data["chosen_workers"] == 1
    assert data["verdict"]


def test_shipped_example_dataloader_with_workers(tmp_path):
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--config", "configs/user-example.yml", "--workers", "0,2",
                   "--batches", "8", "--json", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [s["workers"] for s in json.loads(out.read_text())["results"]] == [0, 2]


def test_shipped_example_compare_with_workers(tmp_path):
    out = tmp_path / "c.json"
    # The search may stop at 0 workers for this fast pipeline: give it worker counts to try.
    proc = run_cli("compare", "--config", "configs/user-example.yml", "--workers", "0,2",
                   "--steps", "20", "--target-steps", "20", "--batches", "10",
                   "--quiet", "--json", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert sorted(s["workers"] for s in data["loader"]) == [0, 2], data["loader"]


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
            if ln.strip() and not ln.startswith(("W0", "I0"))
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


def test_an_exception_in_a_grain_worker_names_the_users_line(tmp_path):
    model = failing_project(tmp_path, fail_at=6)
    proc = run_cli("dataloader", "--config", "user.yml", "--workers", "2", "--batches", "20",
                   cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert stderr_lines(proc) == [
        f"pipecheck: error: dataset (model.py:{line_of(model.read_text(), '# TRANSFORM')}) "
        "raised ValueError: cannot parse record 6 (in the input pipeline, workers=2, threads=1)"]


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
    assert [r["workers"] for r in rows] == [0, 2]
    assert all(r["examples_per_batch"] == 64 for r in rows)
    assert all(any("grain.DataLoader" in w for w in r["warnings"]) for r in rows)


def test_nnx_and_data_loader_under_compare(tmp_path):
    out = tmp_path / "c.json"
    proc = run_cli("compare", "--config", NNX_CONFIG, "--workers", "0,1", "--steps", "12",
                   "--target-steps", "5", "--batches", "5", "--quiet", "--json", str(out),
                   cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert sorted(s["workers"] for s in data["loader"]) == [0, 1]
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
MAXTEXT_LIKE = textwrap.dedent('''
    """A MaxText-shaped input pipeline and a tiny language model, as a user writes them."""
    import json
    import os

    import grain
    import jax
    import jax.numpy as jnp
    import numpy as np

    SEQ = 32
    VOCAB = 256


    def write_corpus(path, n=400):
        from array_record.python.array_record_module import ArrayRecordWriter

        writer = ArrayRecordWriter(path, "group_size:1")
        rng = np.random.default_rng(0)
        for i in range(n):
            words = " ".join("w%d" % rng.integers(0, 999) for _ in range(rng.integers(3, 20)))
            writer.write(json.dumps({"id": i, "text": words}).encode())
        writer.close()


    class ParseAndTokenize(grain.transforms.Map):
        def map(self, record):
            text = json.loads(record)["text"]
            ids = np.frombuffer(text.encode(), np.uint8).astype(np.int32)[:SEQ]
            return {"inputs": ids, "targets": np.roll(ids, -1)}


    def make_dataset(config):
        path = config["params"]["corpus"]
        if not os.path.exists(path):
            write_corpus(path)
        source = grain.sources.ArrayRecordDataSource([path])
        ds = (grain.MapDataset.source(source).seed(0).shuffle().repeat().map(ParseAndTokenize())
              .to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=64)))
        ds = grain.experimental.FirstFitPackIterDataset(
            ds, length_struct={"inputs": SEQ, "targets": SEQ}, num_packing_bins=4)
        return ds.batch(config["batch_size"], drop_remainder=True)


    def init(config):
        rng = np.random.default_rng(0)
        return {"emb": rng.standard_normal((VOCAB, 16)).astype(np.float32) * 0.1,
                "out": rng.standard_normal((16, VOCAB)).astype(np.float32) * 0.1}


    @jax.jit
    def train_step(state, batch):
        def loss_fn(p):
            logits = p["emb"][batch["inputs"]] @ p["out"]
            logp = jax.nn.log_softmax(logits)
            return -jnp.mean(jnp.take_along_axis(logp, batch["targets"][..., None], -1))

        loss, g = jax.value_and_grad(loss_fn)(state)
        return jax.tree.map(lambda p, d: p - 0.1 * d, state, g), {"loss": loss}
''')


def maxtext_config(tmp_path: pathlib.Path) -> pathlib.Path:
    d = tmp_path / "lm"
    d.mkdir()
    (d / "maxtext_like.py").write_text(MAXTEXT_LIKE)
    cfg = tmp_path / "lm.yml"
    cfg.write_text("workload:\n"
                   + "".join(f"  {r}: {d / 'maxtext_like.py'}:{r}\n"
                             for r in ("init", "train_step"))
                   + f"  dataset: {d / 'maxtext_like.py'}:make_dataset\n"
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
    assert (setting["workers"], setting["threads"], setting["prefetch"]) == (1, 4, 64)
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
    assert [(s["threads"], s["prefetch"]) for s in data["loader"]] == [(4, 64)]
    assert data["chosen_threads"] == 4
    assert any("sets its own read options" in w for w in data["warnings"]), data["warnings"]
