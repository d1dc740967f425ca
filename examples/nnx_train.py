"""A Flax NNX training script, as the Flax tutorials write one, timed by pipecheck.

    pip install 'pipecheck[nnx]'
    python examples/nnx_train.py                 # your loop under pipecheck.Monitor
    pipecheck compare --config configs/nnx-example.yml   # the same functions, pipecheck's loop

The model, optimizer and metrics are NNX objects that ``train_step`` updates in place under
``nnx.jit``; the input pipeline is a ``grain.DataLoader`` (data source + sampler +
operations). Nothing here is pipecheck-specific except the lines marked ``pipecheck``:
pipecheck runs ``init``, ``train_step`` and ``dataset`` without edits (see
docs/user-workloads.md), and the Monitor needs only that the step returns its loss.
"""

from __future__ import annotations

import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

DIM, HIDDEN = 64, 256


class MLP(nnx.Module):
    def __init__(self, hidden: int, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(DIM, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))[:, 0]


def init(config):
    """The training state: the NNX objects train_step updates in place."""
    model = MLP(config["params"].get("hidden", HIDDEN), nnx.Rngs(config["seed"]))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    metrics = nnx.MultiMetric(loss=nnx.metrics.Average("loss"))
    return model, optimizer, metrics


@nnx.jit
def train_step(model, optimizer, metrics, batch):
    """One Adam step, in place; returns the loss (what the Monitor and pipecheck time by)."""

    def loss_fn(model):
        return jnp.mean((model(batch["x"]) - batch["y"]) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    metrics.update(loss=loss)
    return loss


class Records:
    """A random-access data source: record i is one example (a disk read, in real life)."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, index):
        x = np.random.default_rng(index).standard_normal(DIM).astype(np.float32)
        return {"x": x, "y": np.float32(np.sin(x.sum()))}


class Normalize(grain.transforms.Map):
    def map(self, element):
        return {"x": element["x"] / np.sqrt(DIM), "y": element["y"]}


def dataset(config, worker_count=0):
    """The input pipeline: a grain.DataLoader of whole batches (pipecheck sets worker_count
    when it measures)."""
    source = Records()
    return grain.DataLoader(
        data_source=source,
        sampler=grain.samplers.IndexSampler(len(source), shuffle=True, seed=config["seed"],
                                            num_epochs=None,
                                            shard_options=grain.sharding.NoSharding()),
        operations=[Normalize(), grain.transforms.Batch(config["batch_size"],
                                                        drop_remainder=True)],
        worker_count=worker_count,
    )


def main(steps=60):
    from absl import flags

    from pipecheck import Monitor  # pipecheck

    flags.FLAGS.mark_as_parsed()  # Grain reads absl flags: needed without absl.app.run
    config = {"seed": 0, "batch_size": 64, "params": {}}
    model, optimizer, metrics = init(config)
    loader = dataset(config, worker_count=2)
    mon = Monitor(config={"example": "nnx_train", **config})  # pipecheck
    for step, batch in enumerate(mon.batches(loader)):  # pipecheck
        mon.step(train_step, model, optimizer, metrics, batch)  # pipecheck: returns the loss
        if step % 25 == 0 and step:
            with mon.span("eval"):  # pipecheck
                print(f"step {step}: mean loss {float(metrics.compute()['loss']):.4f}")
                metrics.reset()
        if step + 1 == steps:
            break
    mon.save("nnx_run.json", force=True)  # pipecheck
    print(mon.report())
    print("wrote nnx_run.json")


if __name__ == "__main__":
    main()
