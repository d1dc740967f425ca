"""A Flax NNX training loop under pipecheck.Monitor, with an eager text generation every 20
steps outside any span: the Monitor flags those steps, names what they spent their time on
(the first generation compiles dozens of small eager functions), keeps them out of the
steady state, lists them in the report and tags them for the plot.

    python examples/nnx_generation_loop.py nnx_run.json
    pipecheck plot nnx_run.json -o nnx_run.png
"""
import sys

import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import flags
from flax import nnx

from pipecheck import Monitor

STEPS, GEN_EVERY = 60, 20


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(256, 1024, rngs=rngs)
        self.down = nnx.Linear(1024, 256, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.relu(self.up(x)))


@nnx.jit
def train_step(model, optimizer, batch):
    def loss_fn(m):
        return jnp.mean((m(batch["x"]) - batch["y"]) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def generate(model, x, tokens=600):
    """Eager sampling: every op dispatches on its own, and each token is read back."""
    out = []
    for _ in range(tokens):
        y = model(x)
        x = jnp.tanh(y)
        out.append(int(jnp.argmax(y[0])))
    return out


def dataset():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((1024, 256), dtype=np.float32)
    ds = grain.MapDataset.source(xs).repeat().map(lambda x: {"x": x, "y": np.roll(x, 1)})
    ds = ds.to_iter_dataset().batch(64)
    return ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=1))


def main(out_path):
    flags.FLAGS.mark_as_parsed()
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)
    mon = Monitor(config={"loop": "nnx", "gen_every": GEN_EVERY})
    it = iter(dataset())
    for step, batch in enumerate(mon.batches(it)):
        mon.step(train_step, model, optimizer, batch)
        if step % GEN_EVERY == GEN_EVERY - 1 and step < STEPS - 1:
            generate(model, jnp.asarray(batch["x"][:1]))
        if step + 1 == STEPS:
            break
    it.close()
    mon.save(out_path)
    print(mon.report())


if __name__ == "__main__":
    main(sys.argv[1])
