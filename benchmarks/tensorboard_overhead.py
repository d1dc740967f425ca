"""Overhead of Monitor(tensorboard_dir=...): the same Monitor loop with and without the
TensorBoard scalars, side by side in one run (the loops and steps of monitor_overhead.py).

    PYTHONPATH=. python benchmarks/tensorboard_overhead.py [--rounds 11] [--steps 150]

1. End to end: the jitted matmul-chain step (tens of ms on a 2-core CPU), the same batches,
   under Monitor without and with ``tensorboard_dir`` (default ``tensorboard_every_s``), and
   without again, round by round, each round starting with another case. Prints the median
   ratio with / (the mean of the round's two runs without), and without again / without
   (the noise floor).
2. Host cost per step: the same loops with a step that does no device work (only the
   Monitor's machinery is timed; the writer thread competes with the loop for the GIL and the
   cores), 20,000 steps, ``finish`` included, without ``tensorboard_dir``, at the default
   interval and at ``--short-interval`` (a fold every 0.1 s), alternating; and the scalars
   read back from the event file (every step is there).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitor_overhead as mo  # noqa: E402 - the Monitor overhead benchmark's loops and steps

from pipecheck import Monitor  # noqa: E402
from pipecheck.monitor.tensorboard import TENSORBOARD_EVERY_S  # noqa: E402


def monitored(step, w, batches, logdir: str | None, every_s: float = TENSORBOARD_EVERY_S
              ) -> tuple[float, int]:
    """Seconds for the loop and ``finish``; steps written to the event file."""
    kw = {} if logdir is None else {"tensorboard_dir": logdir, "tensorboard_every_s": every_s}
    t0 = time.perf_counter()
    mon = Monitor(env={"benchmark": True}, **kw)
    for x in mon.batches(batches):
        w, _ = mon.step(step, w, x)
    mon.finish()
    wall = time.perf_counter() - t0
    return wall, (mon._scalars.steps_written if mon._scalars is not None else 0)


def rotated(cases: list, r: int) -> list:
    """The cases in round ``r``'s order: each round starts with another one."""
    k = r % len(cases)
    return cases[k:] + cases[:k]


def end_to_end(rounds: int, steps: int, tmp: str) -> float:
    rng = np.random.default_rng(0)
    batches = [jnp.asarray(rng.standard_normal((64, 256), dtype=np.float32))
               for _ in range(steps)]
    w = jnp.eye(256, dtype=jnp.float32) * 0.5
    mo.bare(mo.train_step, w, batches[:3])  # compile once, outside the timings
    walls: dict[str, list[float]] = {"without": [], "with": [], "without again": []}
    cases = [("without", None), ("with", "tb"), ("without again", None)]
    for r in range(rounds):
        for label, sub in rotated(cases, r):
            logdir = None if sub is None else os.path.join(tmp, f"e2e-{r}")
            wall, written = monitored(mo.train_step, w, batches, logdir)
            assert sub is None or written == steps, (written, steps)
            walls[label].append(wall)
    ratio = [a / (0.5 * (b + c)) for a, b, c in zip(
        walls["with"], walls["without"], walls["without again"], strict=True)]
    floor = [a / b for a, b in zip(walls["without again"], walls["without"], strict=True)]
    step_ms = 1e3 * statistics.median(walls["without"]) / steps
    print(f"end to end: {rounds} rounds x {steps} steps (Monitor without tensorboard_dir, "
          f"with it, without again; each round starting with another), step {step_ms:.1f} ms")
    for label, xs in (("with / without", ratio),
                      ("without again / without (noise floor)", floor)):
        q = statistics.quantiles(xs, n=4)
        print(f"  {label:38s} median {statistics.median(xs):.4f} "
              f"({100 * (statistics.median(xs) - 1):+.2f}%), IQR {q[0]:.4f}..{q[2]:.4f}")
    return step_ms


def host_costs(rounds: int, n: int, short_s: float, tmp: str, step_ms: float) -> None:
    items = list(range(n))
    walls: dict[str, list[float]] = {"without": [], "default": [], "short": []}
    cases = [("without", None), ("default", TENSORBOARD_EVERY_S), ("short", short_s)]
    written = []
    for r in range(rounds):
        for label, every in rotated(cases, r):
            logdir = None if every is None else os.path.join(tmp, f"host-{label}-{r}")
            wall, got = monitored(mo.null_step, 0, items, logdir,
                                  every if every is not None else TENSORBOARD_EVERY_S)
            walls[label].append(wall / n)
            if every is not None:
                written.append(got)
    base = statistics.median(walls["without"])
    print(f"host cost per step (a step with no device work, {n} steps, finish included, "
          f"median of {rounds}, each round starting with another case):")
    print(f"  {'Monitor, no tensorboard_dir':40s} {1e6 * base:6.2f} us/step")
    for label, every in (("default", TENSORBOARD_EVERY_S), ("short", short_s)):
        m = statistics.median(walls[label])
        print(f"  {f'tensorboard_every_s={every:g}':40s} {1e6 * m:6.2f} us/step  "
              f"(+{1e6 * (m - base):.2f}; = {100 * (m - base) / (1e-3 * step_ms):.3f}% of the "
              f"{step_ms:.1f} ms step above)")
    print(f"  steps in the event file: {min(written)} to {max(written)} of {n} in every run")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--host-rounds", type=int, default=5)
    ap.add_argument("--host-steps", type=int, default=20_000)
    ap.add_argument("--short-interval", type=float, default=0.1)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as tmp:
        step_ms = end_to_end(a.rounds, a.steps, tmp)
        host_costs(a.host_rounds, a.host_steps, a.short_interval, tmp, step_ms)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
