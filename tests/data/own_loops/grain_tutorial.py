"""An input-bound loop over a ``grain.DataLoader`` with 4 worker processes and a slow map
(a decode that takes 3 ms an example), as Grain's training tutorial writes it: one pass,
a jitted step far cheaper than its batch.

usage: python grain_tutorial.py OUT.json

The 4 workers finish their batches at about the same time, so the loop waits for one and
finds the next ones ready: its steps come in bursts. The script writes the time each
iteration began to OUT.json.times (a JSON list, perf_counter seconds), the loop's own wall
clock, for the test to set beside the record.
"""
import json
import sys
import time

import absl.flags
import grain
import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

DIM, BATCH, STEPS, WORKERS = 64, 8, 200, 4


class Records:
    """A random-access data source of ``STEPS`` batches of examples."""

    def __len__(self):
        return BATCH * STEPS

    def __getitem__(self, index):
        return np.random.default_rng(index).standard_normal(DIM).astype(np.float32)


class Decode(grain.transforms.Map):
    """The slow part: 3 ms an example (an image decode, in real life)."""

    def map(self, x):
        time.sleep(0.003)
        return {"x": x, "y": np.float32(np.tanh(x.sum()))}


def loss_fn(params, batch):
    h = jnp.tanh(batch["x"] @ params["w1"])
    return jnp.mean((h @ params["w2"] - batch["y"]) ** 2)


@jax.jit
def train_step(params, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    return jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads), {"loss": loss}


def main(out):
    source = Records()
    sampler = grain.samplers.IndexSampler(len(source), shuffle=True, seed=0, num_epochs=1,
                                          shard_options=grain.sharding.NoSharding())
    loader = grain.DataLoader(data_source=source, sampler=sampler,
                              operations=[Decode(), grain.transforms.Batch(BATCH,
                                                                           drop_remainder=True)],
                              worker_count=WORKERS)
    rng = np.random.default_rng(0)
    params = {"w1": jnp.asarray(rng.standard_normal((DIM, 128), np.float32) / 8),
              "w2": jnp.asarray(rng.standard_normal((128,), np.float32) / 12)}
    mon = Monitor(config={"loop": "grain_tutorial", "workers": WORKERS, "batch_size": BATCH})
    began = []
    for batch in mon.batches(loader):
        began.append(time.perf_counter())
        params, metrics = mon.step(train_step, params, batch)
    mon.save(out, force=True)
    with open(out + ".times", "w") as f:
        json.dump(began, f)
    print(mon.report())


if __name__ == "__main__":
    absl.flags.FLAGS.mark_as_parsed()
    main(sys.argv[1])
