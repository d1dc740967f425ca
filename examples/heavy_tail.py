"""A pipeline with slow samples, for `pipecheck dataloader --config configs/heavy-tail.yml`.

One example in 20 is a long document: decoding it takes 20 ms where the others take 1 ms.
Each batch of 8 waits for its examples, so a batch that holds a long one takes 27 ms
instead of 8 ms. `pipecheck dataloader` times the decode stage's examples one by one
(after the timed batches) and reports the tail as a slow-samples finding.
"""

import time

import grain
import jax.numpy as jnp
import numpy as np


def decode(i):
    time.sleep(0.020 if i % 20 == 7 else 0.001)  # a long document in every 20
    return {"x": np.full((16,), i % 100, np.float32)}


def dataset(config):
    """Examples decoded, then batched: a Grain IterDataset of whole batches."""
    return (grain.MapDataset.range(1 << 20).map(decode)
            .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=1))
            .batch(config["batch_size"]))


def init(config):
    return {"w": jnp.zeros((16,), jnp.float32)}


def train_step(state, batch):
    loss = jnp.mean((batch["x"] - state["w"]) ** 2)
    return {"w": state["w"] * 0.99}, {"loss": loss}
