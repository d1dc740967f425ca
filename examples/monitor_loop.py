"""A complete training loop of your own, timed by pipecheck.Monitor.

    python examples/monitor_loop.py              # writes monitor_run.json, monitor_trace.json
    pipecheck plot monitor_run.json -o monitor_run.png

A small MLP regression with optax, a Python loader that sleeps like I/O, a checkpoint
every 20 steps and an eval every 25. Nothing here is pipecheck-specific except the
five marked lines.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from pipecheck import Monitor

STEPS, BATCH, DIM, HIDDEN = 120, 64, 128, 512


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (DIM, HIDDEN)) / DIM ** 0.5,
            "w2": jax.random.normal(k2, (HIDDEN, 1)) / HIDDEN ** 0.5}


def loss_fn(params, batch):
    h = jax.nn.relu(batch["x"] @ params["w1"])
    return jnp.mean((h @ params["w2"] - batch["y"]) ** 2)


optimizer = optax.adam(1e-3)


@jax.jit
def train_step(state, batch):
    params, opt_state = state
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), {"loss": loss}


eval_step = jax.jit(loss_fn)


def loader(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        time.sleep(0.002)  # reading from disk
        x = rng.standard_normal((BATCH, DIM), dtype=np.float32)
        yield {"x": x, "y": x[:, :1] * 2.0}


def save_checkpoint(state):
    host_state = jax.device_get(state)  # blocks until the state is computed
    np.savez("/tmp/monitor_loop_ckpt.npz", *jax.tree.leaves(host_state))


def main():
    params = init_params(jax.random.PRNGKey(0))
    state = (params, optimizer.init(params))
    mon = Monitor(config={"example": "monitor_loop", "batch": BATCH})   # pipecheck (1)
    losses = []
    for step, batch in enumerate(mon.batches(loader(STEPS))):          # pipecheck (2)
        state, metrics = mon.step(train_step, state, batch)            # pipecheck (3)
        losses.append(metrics["loss"])  # keep the array; convert later, not now
        if step % 20 == 0 and step:
            with mon.span("checkpoint"):                               # pipecheck (4)
                save_checkpoint(state)
        if step % 25 == 0 and step:
            with mon.span("eval"):
                float(eval_step(state[0], batch))
    mon.save("monitor_run.json", force=True)                           # pipecheck (5)
    mon.write_trace("monitor_trace.json", force=True)
    print(mon.report())
    print(f"\nfinal loss {float(losses[-1]):.4f}; wrote monitor_run.json, monitor_trace.json")


if __name__ == "__main__":
    main()
