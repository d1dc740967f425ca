"""A loop over a ``grain.DataLoader`` with 2 worker processes, iterated anew every epoch
(``for batch in mon.batches(loader)`` in a function per epoch, the Monitor passed in), an
evaluation at the end of each epoch, as the Flax/Grain tutorials write it.

usage: python grain_epochs.py OUT.json

Each epoch's ``iter(loader)`` starts the 2 workers again (spawned processes that import
grain and jax): the first batch of every epoch waits for them.
"""
import sys

import absl.flags
import grain
import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

DIM, BATCH, EPOCHS, STEPS_PER_EPOCH = 64, 32, 4, 16


class Records:
    """A random-access data source (a file of records, in real life); its length a multiple
    of the 2 workers' batches (each worker drops the remainder of its share)."""

    def __len__(self):
        return BATCH * STEPS_PER_EPOCH

    def __getitem__(self, index):
        x = np.random.default_rng(index).standard_normal(DIM).astype(np.float32)
        return {"x": x, "y": np.float32(np.tanh(x.sum()))}


def make_loader(seed):
    source = Records()
    sampler = grain.samplers.IndexSampler(len(source), shuffle=True, seed=seed, num_epochs=1,
                                          shard_options=grain.sharding.NoSharding())
    return grain.DataLoader(data_source=source, sampler=sampler,
                            operations=[grain.transforms.Batch(BATCH, drop_remainder=True)],
                            worker_count=2)


def loss_fn(params, batch):
    h = jnp.tanh(batch["x"] @ params["w1"])
    return jnp.mean((h @ params["w2"] - batch["y"]) ** 2)


@jax.jit
def train_step(params, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    return jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads), {"loss": loss}


eval_step = jax.jit(loss_fn)


def train_epoch(mon, params, loader):
    for batch in mon.batches(loader):
        params, metrics = mon.step(train_step, params, batch)
    return params, metrics


def evaluate(params, batches):
    return float(np.mean([eval_step(params, b) for b in batches]))


def main(out):
    rng = np.random.default_rng(0)
    params = {"w1": jnp.asarray(rng.standard_normal((DIM, 128), np.float32) / 8),
              "w2": jnp.asarray(rng.standard_normal((128,), np.float32) / 12)}
    held_out = [Records()[i] for i in range(4 * BATCH)]
    held_out = [{"x": np.stack([e["x"] for e in held_out[i:i + BATCH]]),
                 "y": np.stack([e["y"] for e in held_out[i:i + BATCH]])}
                for i in range(0, len(held_out), BATCH)]
    loader = make_loader(seed=0)
    mon = Monitor(config={"loop": "grain_epochs", "epochs": EPOCHS, "batch_size": BATCH,
                          "dataset_size": BATCH * STEPS_PER_EPOCH})
    for epoch in range(EPOCHS):
        params, metrics = train_epoch(mon, params, loader)
        with mon.span("eval"):
            print(f"epoch {epoch}: eval loss {evaluate(params, held_out):.4f}")
    mon.save(out, force=True)
    print(mon.report())


if __name__ == "__main__":
    absl.flags.FLAGS.mark_as_parsed()
    main(sys.argv[1])
