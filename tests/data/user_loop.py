"""A user's own training loop under pipecheck.Monitor, run as a script by the tests.

usage: python user_loop.py OUT.json STEPS {lagged|current} [TRACE.json]

``current`` logs ``float(loss)`` of the step just dispatched (a forced sync) on the line
marked FORCED-SYNC; ``lagged`` does not.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

ITERS = 150  # matmul chain length: ~25 ms per step on a 2-core CPU


@jax.jit
def train_step(w, x):
    h = jax.lax.fori_loop(0, ITERS, lambda _, a: jnp.tanh(a @ w), x)
    loss = jnp.mean(h * h)
    return w - 1e-6 * loss, {"loss": loss}


def loader(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        time.sleep(0.002)  # a little I/O
        yield rng.standard_normal((64, 256), dtype=np.float32)


def main(out: str, steps: int, mode: str, trace: str | None) -> None:
    w = jnp.eye(256, dtype=jnp.float32) * 0.5
    mon = Monitor(config={"loop": "tests/data/user_loop.py", "mode": mode})
    history = []
    for step, x in enumerate(mon.batches(loader(steps))):
        with mon.span("device_put"):
            x = jax.device_put(x)
        w, metrics = mon.step(train_step, w, x)
        if mode == "current":
            history.append(float(metrics["loss"]))  # FORCED-SYNC
        if step and step % 10 == 0:
            with mon.span("checkpoint"):
                np.save("/dev/null", np.asarray(jax.device_get(w)))
        if step == 7:
            with mon.span("eval"):
                jax.block_until_ready(w)
    mon.finish()
    mon.save(out, force=True)
    if trace:
        mon.write_trace(trace, force=True)
    print(mon.report())


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
