"""Host cost of calling a user's train step through pipecheck's adapter.

A user workload's step reaches the timed loop as ``GuardedStep(UserStep(step))``: exceptions
become one-line errors, and an NNX step (objects updated in place, the loss returned) is
called with the objects and its loss wrapped as ``(state, {"loss": loss})``. This script
measures, side by side and alternating, the dispatch of the bare jitted step and of the
adapted one, for a functional step (jax.jit) and an NNX step (nnx.jit), and prints the
added host time per call and the ratio of the dispatch loops. No device work is waited for
inside a timed loop of dispatches except once at its end.

    python benchmarks/user_step_overhead.py [--pairs 10] [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from pipecheck import stats
from pipecheck.user_code import GuardedStep
from pipecheck.workloads.step_styles import UserStep

BATCH = {"x": np.ones((32, 64), np.float32), "y": np.zeros((32,), np.float32)}


@jax.jit
def functional_step(state, batch):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((batch["x"] @ w)[:, 0] - batch["y"]) ** 2)(
        state)
    return state - 0.01 * g, {"loss": loss}


@nnx.jit
def nnx_step(model, optimizer, batch):
    def loss_fn(m):
        return jnp.mean((m(batch["x"])[:, 0] - batch["y"]) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def loop(call, state, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        state, metrics = call(state)
    jax.block_until_ready(metrics["loss"])
    return time.perf_counter() - t0, state


def bench(name, bare, adapted, state, pairs, calls):
    loop(bare, state, 5)
    loop(adapted, state, 5)  # compiled and warm
    ratios, added = [], []
    for i in range(pairs):
        t = {}
        for label in (("bare", "adapted") if i % 2 == 0 else ("adapted", "bare")):
            t[label], state = loop(bare if label == "bare" else adapted, state, calls)
        ratios.append(t["adapted"] / t["bare"])
        added.append((t["adapted"] - t["bare"]) / calls)
    lo, hi = stats.median_ci(ratios)
    print(f"{name}: {pairs} alternating pairs x {calls} dispatches")
    print(f"  bare dispatch loop per call (last pair): {t['bare'] / calls * 1e6:.1f} us")
    print(f"  ratio adapted/bare: median {statistics.median(ratios):.4f} "
          f"(95% CI {lo:.4f} .. {hi:.4f})")
    print(f"  added host time per call: median {statistics.median(added) * 1e6:+.2f} us")


def adapter_cost(pairs=5, n=200_000):
    """The adapter's own Python cost per call, around a step that does nothing."""
    def noop(state, batch):
        return state, {"loss": 0.0}

    adapted = GuardedStep(UserStep(noop))
    adapted._step._jitted["functional"] = noop  # no jit: measure the Python layers alone
    costs = []
    for _ in range(pairs):
        t0 = time.perf_counter()
        for _ in range(n):
            noop(0, 0)
        base = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(n):
            adapted(0, 0)
        costs.append((time.perf_counter() - t0 - base) / n)
    return statistics.median(costs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()

    fstep = GuardedStep(UserStep(functional_step))
    fstep._step.use_style(np.zeros((64, 1), np.float32))
    bench("functional step (jax.jit)", lambda s: functional_step(s, BATCH),
          lambda s: fstep(s, BATCH), jnp.zeros((64, 1)), args.pairs, args.calls)

    model = nnx.Linear(64, 1, rngs=nnx.Rngs(0))
    state = (model, nnx.Optimizer(model, optax.sgd(0.01), wrt=nnx.Param))
    nstep = GuardedStep(UserStep(nnx_step))
    nstep._step.use_style(state)
    bench("NNX step (nnx.jit, in place)",
          lambda s: (s, {"loss": nnx_step(*s, BATCH)}), lambda s: nstep(s, BATCH), state,
          args.pairs, args.calls)
    print(f"adapter's own Python cost per call (no-op step): {adapter_cost() * 1e6:.2f} us")


if __name__ == "__main__":
    main()
