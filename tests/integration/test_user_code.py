"""Users' own code, run as a user runs it: entry points given as file paths outside the
repository and off ``sys.path``, with Grain worker processes on (spawned), through the CLI
in a fresh process."""

from __future__ import annotations

import json
import pathlib
import textwrap

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


def test_shipped_example_compare_searches_workers(tmp_path):
    out = tmp_path / "c.json"
    proc = run_cli("compare", "--config", "configs/user-example.yml", "--quiet",
                   "--json", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert any(s["workers"] >= 1 for s in data["loader"]), data["loader"]
