"""A multi-process training loop, each process capturing a window with jax.profiler (run
once per process by tests/integration/test_profile_cli.py, as on N hosts).

usage: profile_multihost_loop.py CAPTURE_DIR PROCESS_ID NUM_PROCESSES PORT

Process 1 loads every batch in 40 ms, the others in 5 ms; every step all-reduces the loss,
so every process steps at the slow one's pace. Each process captures steps 5-24 with
``Monitor(profile_steps=...)`` into ``CAPTURE_DIR/process_<id>``.
"""

import sys
import time

import numpy as np


def main() -> None:
    out, pid, n, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=n, process_id=pid,
                               initialization_timeout=60)
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from pipecheck import Monitor

    mesh = Mesh(np.array(jax.devices()), ("data",))
    batch_sharding = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())

    @jax.jit
    def train_step(w, x):
        loss = jnp.mean(jnp.tanh(x @ w) ** 2)  # over the global batch: all-reduce
        return w - 1e-3 * loss, {"loss": loss}

    def batches():
        while True:
            time.sleep(0.040 if pid == 1 else 0.005)
            yield np.ones((4, 64), np.float32)

    w = jax.device_put(np.eye(64, dtype=np.float32), replicated)
    mon = Monitor(profile_steps=range(5, 25), profile_dir=f"{out}/process_{pid}", gather=False)
    for step, local in enumerate(mon.batches(batches())):
        x = jax.make_array_from_process_local_data(batch_sharding, local)
        w, metrics = mon.step(train_step, w, x)
        if step >= 27:
            break
    mon.finish()


if __name__ == "__main__":
    main()
