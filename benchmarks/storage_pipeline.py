"""The pipeline ``storage_whatif_accuracy.py`` measures, as a user workload: an ArrayRecord
file read by ``grain.sources.ArrayRecordDataSource`` (one read per record), shuffled, each
record decoded into a small array (``params.decode_us`` of CPU), batched. The file's path is
``params.path`` (on a slow mount, in the benchmark)."""

from __future__ import annotations

import time

import grain
import jax.numpy as jnp
import numpy as np


class Decode:
    """A record's bytes as a float32 vector of 16, after ``cpu_s`` of busy CPU."""

    def __init__(self, cpu_s: float) -> None:
        self.cpu_s = cpu_s

    def __call__(self, record: bytes) -> dict:
        end = time.perf_counter() + self.cpu_s
        while time.perf_counter() < end:
            pass
        return {"x": np.frombuffer(record[:64], np.float32).copy()[:16]}


def dataset(config: dict) -> grain.MapDataset:
    """Batches of ``batch_size`` decoded records, in a shuffled order, repeated."""
    params = config["params"]
    source = grain.sources.ArrayRecordDataSource([params["path"]])
    return (grain.MapDataset.source(source).seed(config.get("seed", 0)).shuffle()
            .map(Decode(params.get("decode_us", 100) * 1e-6)).repeat()
            .batch(config["batch_size"]))


def init(config: dict) -> dict:
    return {"w": jnp.zeros((16,), jnp.float32)}


def train_step(state: dict, batch: dict) -> tuple[dict, dict]:
    loss = jnp.mean((batch["x"] - state["w"]) ** 2)
    return {"w": state["w"] * 0.99}, {"loss": loss}
