"""A Flax NNX loop as the Flax tutorials write one: an ``nnx.Module``, an ``nnx.Optimizer``
and an ``nnx.jit`` train step that updates them in place and returns the loss; the data
generated on the host in memory beforehand, the model big enough that compute dominates.

usage: python nnx_compute.py OUT.json
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from pipecheck import Monitor

DIM, HIDDEN, BATCH, STEPS = 256, 1024, 256, 50


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.inp = nnx.Linear(DIM, HIDDEN, rngs=rngs)
        self.mid = nnx.Linear(HIDDEN, HIDDEN, rngs=rngs)
        self.out = nnx.Linear(HIDDEN, 1, rngs=rngs)

    def __call__(self, x):
        h = jax.nn.relu(self.inp(x))
        h = jax.nn.relu(self.mid(h))
        return self.out(h)[:, 0]


@nnx.jit
def train_step(model, optimizer, batch):
    def loss_fn(model):
        return jnp.mean((model(batch["x"]) - batch["y"]) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def make_data(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x, np.sin(x.sum(axis=1)).astype(np.float32)


def get_batches(x, y, steps):
    for step in range(steps):
        i = (step * BATCH) % len(x)
        yield {"x": x[i:i + BATCH], "y": y[i:i + BATCH]}


def main(out):
    x, y = make_data(10 * BATCH)
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    mon = Monitor(config={"loop": "nnx_compute"})
    for batch in mon.batches(get_batches(x, y, STEPS)):
        loss = mon.step(train_step, model, optimizer, batch)
    mon.save(out, force=True)
    print(mon.report())
    print(f"final loss {float(loss):.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
