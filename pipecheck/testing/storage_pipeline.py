"""A pipeline that reads from storage, as a user workload (``dataset``, ``init``,
``train_step`` entry points), for the storage tests and benchmarks: an ArrayRecord file
(``write_array_record``: records written with ``group_size:1``, one read per record) read by
``grain.sources.ArrayRecordDataSource``, shuffled, each record decoded into a small array
after ``params.decode_us`` of CPU, batched. ``config_text`` is its config for ``pipecheck
dataloader --config``, the file given by path (on a slow mount, in the benchmark)."""

from __future__ import annotations

import os
import random
import time

import grain
import jax.numpy as jnp
import numpy as np
from array_record.python.array_record_module import ArrayRecordWriter

RECORDS = 2000
"""Records in the file: a pass over them is longer than any run the tests time."""

RECORD_BYTES = 2048
"""Bytes per record: one FUSE read each (well under the kernel's 128 KiB transfer)."""


def write_array_record(path: str | os.PathLike[str], records: int = RECORDS,
                       record_bytes: int = RECORD_BYTES) -> None:
    """``records`` seeded random records of ``record_bytes`` each, one per ArrayRecord
    group (``group_size:1``: a random read reads one record)."""
    writer = ArrayRecordWriter(str(path), "group_size:1")
    rng = random.Random(0)
    for _ in range(records):
        writer.write(rng.randbytes(record_bytes))
    writer.close()


def config_text(path: str | os.PathLike[str], batch_size: int = 8, decode_us: int = 100
                ) -> str:
    """A pipecheck config (YAML) that runs this module's entry points on the file ``path``."""
    entry = os.path.abspath(__file__)
    return (f"workload:\n  init: {entry}:init\n  train_step: {entry}:train_step\n"
            f"  dataset: {entry}:dataset\nbatch_size: {batch_size}\n"
            f"params:\n  path: {os.fspath(path)}\n  decode_us: {decode_us}\n")


class Decode:
    """A record's bytes as a float32 vector of 16, after ``cpu_s`` of busy CPU."""

    def __init__(self, cpu_s: float) -> None:
        self.cpu_s = cpu_s

    def __call__(self, record: bytes) -> dict[str, np.ndarray]:
        end = time.perf_counter() + self.cpu_s
        while time.perf_counter() < end:
            pass
        return {"x": np.frombuffer(record[:64], np.float32).copy()}


def dataset(config: dict) -> grain.MapDataset:
    """Batches of ``batch_size`` decoded records, in a shuffled order, repeated."""
    params = config["params"]
    source = grain.sources.ArrayRecordDataSource([params["path"]])
    return (grain.MapDataset.source(source).seed(config.get("seed", 0)).shuffle()
            .map(Decode(params.get("decode_us", 100) * 1e-6)).repeat()
            .batch(config["batch_size"]))


def init(config: dict) -> dict[str, jnp.ndarray]:
    return {"w": jnp.zeros((16,), jnp.float32)}


def train_step(state: dict, batch: dict) -> tuple[dict, dict]:
    loss = jnp.mean((batch["x"] - state["w"]) ** 2)
    return {"w": state["w"] * 0.99}, {"loss": loss}
