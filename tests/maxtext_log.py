"""Generated MaxText training logs of any length, in the real line format.

One ``completed step:`` line per step with a glog header and timestamps, the header lines
MaxText prints at start-up (config, versions, parameters, memory, ``Per train step:``),
and every ``checkpoint_every`` steps an asynchronous checkpoint (``Saving checkpoint``,
``Started an asynchronous checkpoint save``, and from the second one ``Waiting for
previous save to complete took ...``) whose cost lands in the next step. Times are
printed with three decimals, as MaxText does. Used by tests and benchmarks/long_runs.py;
logs are written where the caller says (a temporary directory), never committed.
"""

from __future__ import annotations

import datetime
import os
import pathlib

import numpy as np

HEADER_FROM = pathlib.Path(__file__).resolve().parent / "data" / "maxtext_a.log"
"""The start-up lines (config, versions, parameters, memory, Per train step) are this
hand-written log's, up to its first step."""


def header() -> str:
    lines = HEADER_FROM.read_text().splitlines(keepends=True)
    first_step = next(i for i, line in enumerate(lines) if "completed step:" in line)
    return "".join(lines[:first_step])

TOKENS_PER_STEP = 4 * 2048
"""per_device_batch_size x max_target_length in the header's config."""


def write_log(path: str | os.PathLike[str], steps: int, *, seed: int = 0,
              step_s: float = 0.512, checkpoint_every: int = 1000,
              stall_s: float = 9.8) -> None:
    """Write a ``steps``-step log to ``path``: steady steps around ``step_s`` seconds,
    step 0 with compilation, a checkpoint every ``checkpoint_every`` steps whose save
    stalls the next step by about ``stall_s``. Streams: memory does not grow with steps."""
    rng = np.random.default_rng(seed)
    clock = datetime.datetime(2025, 3, 12, 9, 15, 8)
    with open(path, "w") as f:
        f.write(header())
        chunk = 10000
        for first in range(0, steps, chunk):
            n = min(chunk, steps - first)
            times = np.round(step_s * rng.gamma(400, 1 / 400, n), 3)
            losses = 10.873 * np.exp(-(np.arange(first, first + n)) / max(steps, 1) * 2.0) \
                + rng.normal(0, 0.01, n)
            lines = []
            for j in range(n):
                step = first + j
                t = float(times[j])
                if step == 0:
                    t = 41.730
                elif checkpoint_every and step % checkpoint_every == 1 and step > 1:
                    t = round(t + stall_s * float(rng.uniform(0.9, 1.1)), 3)
                clock += datetime.timedelta(seconds=t)
                head = f"I{clock:%m%d %H:%M:%S}.{clock.microsecond:06d} 140233681626944"
                tflops = 21.09 / t
                lines.append(
                    f"{head} train.py:196] completed step: {step}, seconds: {t:.3f}, "
                    f"TFLOP/s/device: {tflops:.3f}, Tokens/s/device: {TOKENS_PER_STEP / t:.3f}, "
                    f"total_weights: 32768, loss: {losses[j]:.3f}, learning_rate: 2.9e-05\n")
                if checkpoint_every and step > 0 and step % checkpoint_every == 0:
                    lines.append(f"{head} checkpointing.py:1] Saving checkpoint at step {step}\n")
                    if step > checkpoint_every:
                        lines.append(f"{head} checkpoint_manager.py:1] Waiting for previous "
                                     f"save to complete took {stall_s:.6f} seconds. If this "
                                     "number is high, consider checkpointing less "
                                     "frequently.\n")
                    lines.append(f"{head} checkpointing.py:1] Started an asynchronous "
                                 f"checkpoint save for step {step}\n")
            f.write("".join(lines))
