"""A user workload pipecheck can run without editing it: a small MLP regression.

Point pipecheck at it with configs/user-example.yml:

    pipecheck synthetic --config configs/user-example.yml
"""

from __future__ import annotations

import grain
import jax
import jax.numpy as jnp
import numpy as np


def init(config):
    """Initial training state: a pytree of arrays."""
    hidden = config["params"].get("hidden", 256)
    rng = np.random.default_rng(config["seed"])
    return {
        "w1": (rng.standard_normal((64, hidden)) / 8).astype(np.float32),
        "w2": (rng.standard_normal((hidden, 1)) / np.sqrt(hidden)).astype(np.float32),
    }


@jax.jit
def train_step(state, batch):
    """One SGD step; returns the new state and metrics with a scalar "loss"."""

    def loss_fn(params):
        pred = jnp.tanh(batch["x"] @ params["w1"]) @ params["w2"]
        return jnp.mean((pred[:, 0] - batch["y"]) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state)
    new_state = jax.tree.map(lambda p, g: p - 0.01 * g, state, grads)
    return new_state, {"loss": loss}


class MakeBatch:
    """Grain map: batch index -> one batch of numpy arrays."""

    def __init__(self, batch_size, seed):
        self.batch_size = batch_size
        self.seed = seed

    def __call__(self, index):
        rng = np.random.default_rng((self.seed, index))
        x = rng.standard_normal((self.batch_size, 64)).astype(np.float32)
        return {"x": x, "y": np.sin(x.sum(axis=1)).astype(np.float32)}


def dataset(config):
    """The input pipeline: an endless Grain MapDataset of whole batches."""
    return grain.MapDataset.range(1 << 30).map(MakeBatch(config["batch_size"], config["seed"]))


def batch(config):
    """One example batch (shapes and dtypes of the real ones)."""
    return MakeBatch(config["batch_size"], config["seed"])(0)
