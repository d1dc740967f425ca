"""Generated MaxText training logs of any length, in the real line format.

The structure is that of ``tests/data/make_maxtext_logs.py``'s fixtures (a real run's): the
header lines MaxText prints at start-up (config, versions, parameters, memory, ``Per train
step:``); one ``completed step:`` line per step with an absl header, written one step late
(MaxText buffers a step's metrics and writes its line after dispatching the next step and
saving any checkpoint); and every ``checkpoint_every`` steps an asynchronous orbax save with
the lines MaxText and orbax write around it:

- on the training thread, ``Waiting for step N to finish before checkpoint...``, ``Waited X
  seconds for step N to finish before starting checkpointing.``, ``Waiting for previous save
  to complete took X seconds`` when the save before is still running, ``[process=0]
  [thread=MainThread] Initiated Pytree async_save. Time taken: Xs (...)`` when the
  blocking part ends (the state copied off the device, ``stall_s``), ``Started an
  asynchronous checkpoint save for step N``;
- on orbax's ``async_save`` thread (its own thread id), ``Background save thread started``
  when the blocking part ends, ``Handler Commit operations completed`` and ``Background save
  thread done. Time taken: Xs`` ``save_s`` later: many steps later, interleaved with their
  lines in time order.

The save's blocking part lands in the step after the checkpoint (step N+1), which is the
stall; the background save overlaps it and the steps after it. Times are printed with
three decimals, as MaxText does. Used by tests and benchmarks/long_runs.py; logs are
written where the caller says (a temporary directory), never committed.
"""

from __future__ import annotations

import datetime
import heapq
import os
import pathlib

import numpy as np

HEADER_FROM = pathlib.Path(__file__).resolve().parent / "data" / "maxtext_a.log"
"""The start-up lines (config, versions, parameters, memory, Per train step) are this
hand-written log's, up to its first step, without its step-0 checkpoint's lines (that save
belongs to the other log's timeline)."""

CHECKPOINT_SOURCES = ("checkpointing.py:", "checkpoint_handler.py:", "async_checkpointer.py:")
"""The source files, in a line's absl header, of MaxText's and orbax's checkpoint lines."""

MAIN_THREAD, ASYNC_THREAD = 140233681626944, 140218007004928
START = datetime.datetime(2025, 11, 22, 10, 14, 42)
"""The training's clock at 0 s: the first step's line lands right after the header's
lines (written at 10:15:24 on 22 November)."""


def header() -> str:
    lines = HEADER_FROM.read_text().splitlines(keepends=True)
    first_step = next(i for i, line in enumerate(lines) if "completed step:" in line)
    return "".join(line for line in lines[:first_step]
                   if not any(src in line for src in CHECKPOINT_SOURCES))

TOKENS_PER_STEP = 4 * 2048
"""per_device_batch_size x max_target_length in the header's config."""

LINE_WRITE_S = 0.003
"""Host time to write a step's line (it lands in the next step's time)."""


def _head(t: float, where: str, level: str = "I", tid: int = MAIN_THREAD) -> str:
    at = START + datetime.timedelta(seconds=t)
    return f"{level}{at:%m%d %H:%M:%S}.{at.microsecond:06d} {tid} {where}] "


def _step_line(step: int, t: float, loss: float) -> str:
    return (f"completed step: {step}, seconds: {t:.3f}, TFLOP/s/device: {21.09 / t:.3f}, "
            f"Tokens/s/device: {TOKENS_PER_STEP / t:.3f}, total_weights: 32768, "
            f"loss: {loss:.3f}, learning_rate: 2.9e-05\n")


class _Lines:
    """Lines of the training thread in time order, with the async save thread's lines
    (known ahead) slipped in where their times fall."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.later: list[tuple[float, int, str]] = []

    def add(self, t: float, text: str, where: str, level: str = "I") -> None:
        self.flush(t)
        self.out.append(_head(t, where, level) + text + "\n")

    def add_async(self, t: float, text: str, where: str) -> None:
        heapq.heappush(self.later, (t, len(self.later) + len(self.out),
                                    _head(t, where, tid=ASYNC_THREAD) + text + "\n"))

    def flush(self, until: float = float("inf")) -> None:
        while self.later and self.later[0][0] <= until:
            self.out.append(heapq.heappop(self.later)[2])

    def take(self) -> str:
        text, self.out = "".join(self.out), []
        return text


def _save(lines: _Lines, step: int, now: float, previous_done: float, blocking_s: float,
          save_s: float, wait_step_s: float) -> tuple[float, float]:
    """The lines of an async checkpoint save of ``step`` begun at ``now`` (the step
    dispatched); returns when the training thread is free again and when the background
    save will be done."""
    lines.add(now, f"Waiting for step {step} to finish before checkpoint...",
              "checkpointing.py:969")
    now += wait_step_s
    lines.add(now, f"Waited {wait_step_s} seconds for step {step} to finish before starting "
              "checkpointing.", "checkpointing.py:973")
    if previous_done > now:
        lines.add(previous_done, f"Waiting for previous save to complete took "
                  f"{previous_done - now:f} seconds. If this number is high, consider "
                  "checkpointing less frequently.", "checkpoint_manager.py:1467", level="W")
        now = previous_done
    now += blocking_s
    lines.add(now, "[process=0][thread=MainThread] Initiated Pytree async_save. Time taken: "
              f"{blocking_s:f}s (batch_requests_ready=0.021345s, total_serialization_initiated="
              f"{blocking_s - 0.024447:f}s, others=0.003102s)",
              "base_pytree_checkpoint_handler.py:758")
    deadline = START + datetime.timedelta(seconds=now + 1200)
    lines.add_async(now, "[process=0][thread=async_save] Background save thread started. "
                    f"Deadline for this save operation is {deadline:%Y-%m-%d %H:%M:%S.%f}",
                    "async_checkpointer.py:77")
    lines.flush(now)
    lines.add(now + 0.001, f"Started an asynchronous checkpoint save for step {step}",
              "checkpointing.py:451")
    done = now + save_s
    lines.add_async(done - 0.4, "[process=0][thread=async_save] 1 Handler Commit operations "
                    f"completed. Time taken: {save_s - 0.4:f}s.", "async_checkpointer.py:91")
    lines.add_async(done, "[process=0][thread=async_save] Background save thread done. "
                    f"Time taken: {save_s:f}s.", "async_checkpointer.py:169")
    return now + 0.001, done


def write_log(path: str | os.PathLike[str], steps: int, *, seed: int = 0,
              step_s: float = 0.512, checkpoint_every: int = 1000,
              stall_s: float = 9.8, save_s: float = 30.0) -> None:
    """Write a ``steps``-step log to ``path``: steady steps around ``step_s`` seconds,
    step 0 with compilation (41.73 s), an async checkpoint after every
    ``checkpoint_every``-th step whose blocking part (about ``stall_s``) stalls the next
    step and whose background thread runs about ``save_s``. Streams: memory does not grow
    with steps."""
    rng = np.random.default_rng(seed)
    lines = _Lines()
    before = 0.0                 # when the previous step ended
    blocked = 0.0                # host time after it spent on checkpoints and log lines
    previous_done = -np.inf      # when the last background save finishes
    last: tuple[int, float, float] | None = None  # the step whose line is still to write
    with open(path, "w") as f:
        f.write(header())
        chunk = 10000
        for first in range(0, steps, chunk):
            n = min(chunk, steps - first)
            own = step_s * rng.gamma(400, 1 / 400, n)
            losses = 10.873 * np.exp(-(np.arange(first, first + n)) / max(steps, 1) * 2.0) \
                + rng.normal(0, 0.01, n)
            blocking = stall_s * rng.uniform(0.9, 1.1, n)
            for j in range(n):
                step = first + j
                took = round(41.730 if step == 0 else blocked + float(own[j]), 3)
                end = before + took
                now = end
                if checkpoint_every and step > 0 and step % checkpoint_every == 0:
                    now, previous_done = _save(lines, step, now, previous_done,
                                               float(blocking[j]), save_s, 0.31)
                if last is not None:  # one-step lag: the previous step's line is written now
                    now += LINE_WRITE_S
                    lines.add(now, _step_line(*last)[:-1], "metric_logger.py:181")
                last = (step, took, float(losses[j]))
                blocked, before = now - end, end
            f.write(lines.take())
        if last is not None:
            lines.add(before + blocked + 0.2, _step_line(*last)[:-1], "metric_logger.py:181")
        lines.flush()
        f.write(lines.take())


def write_log_pair(directory: str | os.PathLike[str], steps: int, prefix: str = ""
                   ) -> tuple[pathlib.Path, pathlib.Path]:
    """Two ``steps``-step logs in ``directory``, ``{prefix}a.log`` around 512 ms a step and
    ``{prefix}b.log`` around 530 ms (the long-run benchmark's A and B)."""
    a, b = pathlib.Path(directory, f"{prefix}a.log"), pathlib.Path(directory, f"{prefix}b.log")
    write_log(a, steps, seed=1, step_s=0.512)
    write_log(b, steps, seed=2, step_s=0.530)
    return a, b
