"""A user's multi-process training script under pipecheck.Monitor (copied outside the repo
by the tests and run once per process, as on N hosts).

usage: multihost_loop.py OUT.json PROCESS_ID NUM_PROCESSES PORT MODE [save [dead-1]]
MODE: ``sync-stall`` (every host's data source stalls at the same local batch) or
``slow-host`` (process 1 loads every batch slowly). ``save``: Monitor(save_to=OUT.json) with
a 5 s wait for the other hosts; ``dead-1``: process 1 dies after its loop (a host lost
before the end: it never sends its summary).
"""

import os
import sys
import time

import numpy as np

STEPS = 40
BASE_MS = 10.0
STALL_AT = 20
STALL_MS = 500.0
SLOW_MS = 45.0


class Load:
    """Grain map: local batch index -> a (4, 64) batch, sleeping as I/O would."""

    def __init__(self, pid: int, n: int, mode: str) -> None:
        self.pid, self.n, self.mode = pid, n, mode

    def __call__(self, global_index: int) -> dict:
        local = global_index // self.n
        ms = BASE_MS
        if self.mode == "sync-stall" and local == STALL_AT:
            ms = STALL_MS
        if self.mode == "slow-host" and self.pid == 1:
            ms = SLOW_MS
        time.sleep(ms / 1000.0)
        return {"x": np.full((4, 64), 0.01 * (local % 7), np.float32)}


def main() -> None:
    out, pid, n, port, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
        sys.argv[5]
    import absl.flags

    absl.flags.FLAGS.mark_as_parsed()
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=n, process_id=pid,
                               initialization_timeout=60)
    import grain
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from pipecheck import Monitor

    mesh = Mesh(np.array(jax.devices()), ("data",))
    batch_sharding = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())

    @jax.jit
    def train_step(w, batch):
        loss = jnp.mean(jnp.tanh(batch["x"] @ w) ** 2)  # over the global batch: all-reduce
        return w - 1e-3 * loss, {"loss": loss}

    ds = (grain.MapDataset.range(10**6)[pid::n].map(Load(pid, n, mode))
          .to_iter_dataset(grain.ReadOptions(num_threads=0))
          .mp_prefetch(grain.MultiprocessingOptions(num_workers=1, per_worker_buffer_size=1)))
    w = jax.device_put(np.eye(64, dtype=np.float32), replicated)
    save = "save" in sys.argv[6:]
    mon = Monitor(config={"script": "multihost_loop", "mode": mode},
                  distributed_timeout_s=5 if save else 60,
                  save_to=out if save else None, save_every_s=0.5)
    it = iter(ds)
    for step, local in enumerate(mon.batches(it)):
        batch = {k: jax.make_array_from_process_local_data(batch_sharding, v)
                 for k, v in local.items()}
        w, metrics = mon.step(train_step, w, batch)
        if step + 1 >= STEPS:
            break
    if pid == 1 and "dead-1" in sys.argv[6:]:
        float(metrics["loss"])  # its part of the last all-reduce is done
        os._exit(9)  # dies: no summary, no end written (its last periodic write stays)
    mon.save(out)
    del local, batch
    it.close()
    print(mon.report())


if __name__ == "__main__":
    main()
