"""Loader dynamics under the Monitor: a Grain loader whose workers start after the restore
and deliver in bursts, and a generator that pays at each epoch boundary.

    python examples/monitor_loader_dynamics.py [PREFIX]   # writes PREFIX.grain.json, ...

Three loops, each a Monitor run saved to a JSON file:

- ``grain``: 3 Grain workers decode 4 examples a batch at 20 ms each (80 ms a batch), and
  a step trains on it in ~5 ms; the state is restored first (0.8 s, a ``restore`` span)
  and the workers start only when the loop asks for its first batch. The Monitor finds
  the stall every 3 steps (the workers, each handing over a batch in turn) and the first
  batch that the restore could have hidden;
- ``epochs``: a generator that reopens its files at each epoch (150 ms), over a data set
  of 24 examples, 4 a batch: a stall every 6 steps, at the epoch boundary;
- ``clean``: the same generator without that cost: no finding.

It prints the grain run's report, then the epochs run's findings. The Monitor learns the
loader's shape from its ``config`` (``num_workers``, ``per_worker_buffer_size``,
``dataset_size`` and ``batch_size``): see docs/monitor.md.
"""

import sys
import time

import grain
import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from pipecheck import Monitor
from pipecheck.report.format import findings_text
from pipecheck.report.monitor import format_monitor


def slow_example(i):
    time.sleep(0.02)  # decoding: 20 ms an example, in the worker
    return np.full((16,), i, np.float32)


def epochs(n_epochs, per_epoch, cost):
    for _ in range(n_epochs):
        time.sleep(cost)  # reopen and reshuffle the files at each epoch
        for i in range(per_epoch):
            yield np.full((4, 16), i, np.float32)  # batches of 4, as the Grain loop's


def take(ds, n):
    it = iter(ds)  # the workers start at the first batch
    try:
        for _ in range(n):
            yield next(it)
    finally:
        it.close()


@jax.jit
def train_step(w, x):
    loss = jnp.mean((x @ w) ** 2)
    return w * 0.999, {"loss": loss}


def run(out, batches, config, restore_s=0.0):
    w = jnp.eye(16, dtype=jnp.float32)
    mon = Monitor(config=config, locate_syncs=False)
    if restore_s:
        with mon.span("restore"):
            time.sleep(restore_s)  # reading the last checkpoint
    for x in mon.batches(batches):
        w, _ = mon.step(train_step, w, jnp.asarray(x))
        time.sleep(0.004)  # the rest of the step
    return mon.save(out, force=True)


if __name__ == "__main__":
    flags.FLAGS.mark_as_parsed()  # Grain reads absl flags: a plain script marks them parsed
    out = sys.argv[1] if len(sys.argv) > 1 else "loader_dynamics"
    ds = (grain.MapDataset.range(100_000).map(slow_example)
          .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=1))
          .batch(4)
          .mp_prefetch(grain.MultiprocessingOptions(num_workers=3, per_worker_buffer_size=1)))
    bursts = run(out + ".grain.json", take(ds, 48),
                 {"num_workers": 3, "per_worker_buffer_size": 1, "batch_size": 4},
                 restore_s=0.8)
    boundary = run(out + ".epochs.json", epochs(8, 6, 0.15),
                   {"dataset_size": 24, "batch_size": 4})
    run(out + ".clean.json", epochs(1, 48, 0.0), {"dataset_size": 192, "batch_size": 4})
    print(format_monitor(bursts))
    print()
    print("the generator with an epoch boundary:")
    print(findings_text(boundary.findings))
