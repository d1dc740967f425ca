"""Writes maxtext_a.log and maxtext_b.log: MaxText training logs with the structure of real ones.

The message texts are those MaxText and orbax print (maxtext: metric_logger.py,
checkpointing.py, max_utils.py; orbax: checkpoint_manager.py, async_checkpointer.py,
base_pytree_checkpoint_handler.py, composite_checkpoint_handler.py). The structure follows a
real run: absl headers (``I1122 10:23:54.123456 140711123912512 file.py:N] ``) carrying the
thread id; orbax's ``[process=N][thread=NAME]`` prefixes; the background ``async_save`` thread's
lines interleaved with the training thread's; a save's blocking part (the state copied off the
device) logged where orbax logs it, on the training thread when it ends (``Initiated Pytree
async_save. Time taken: Xs (...)``, then the ``CompositeCheckpointHandler`` line MaxText's
composite checkpoints add), before the background thread starts; one-step logging lag (MaxText
buffers a step's metrics and writes its ``completed step: N`` line after dispatching step N+1,
so the line is stamped at the end of step N+1's interval); ``print`` output without a header
(``Per train step:``, and in log B every ``completed step:`` line, as when stdout and stderr are
captured apart and merged).

Timeline of log A (median step 0.235 s): step 0 compiles (41.7 s); the step-0 checkpoint's
blocking part takes 9.84 s (later saves' 0.41 s) and lands in step 1 (10.4 s), then its
background thread runs 18.7 s, across the next 20 steps; at step 20 the next save waits for the
previous one ("Waiting for previous save to complete took ..."), which lands in step 21; step 55
stalls for no logged reason (1.583 s) and step 56 is then fast (0.041 s), an attribution shift.
Log B: the same model and config, a save every 20 steps that never collides, bare step lines.

Run ``python tests/data/make_maxtext_logs.py`` to write them again (deterministic).
"""

from __future__ import annotations

import datetime
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
MAIN, ASYNC, GRAIN, OTHER = 140711123912512, 140698457904896, 140700911015680, 140699821258496
START = datetime.datetime(2025, 11, 22, 10, 14, 27, 118203)
STEPS = 60
PERIOD = 20
TFLOPS = 21.09


def header(level: str, t: float, tid: int, where: str) -> str:
    at = START + datetime.timedelta(seconds=t)
    return f"{level}{at:%m%d %H:%M:%S.%f} {tid} {where}] "


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[float, int, str]] = []

    def add(self, t: float, text: str, level: str = "I", tid: int = MAIN,
            where: str = "train.py:512", bare: bool = False) -> None:
        prefix = "" if bare else header(level, t, tid, where)
        self.lines.append((t, len(self.lines), prefix + text))

    def write(self, path: pathlib.Path) -> None:
        # lines from several threads reach the file in time order, each line whole
        path.write_text("".join(text + "\n" for _, _, text in sorted(self.lines)))


def preamble(log: Log, t: float) -> None:
    for k, v in (("per_device_batch_size", 4), ("max_target_length", 2048), ("steps", STEPS),
                 ("checkpoint_period", PERIOD), ("async_checkpointing", True)):
        log.add(t, f"Config param {k}: {v}", where="pyconfig.py:584")
    log.add(t + 0.4, "System Information: Jax Version: 0.8.1", where="max_utils.py:832")
    log.add(t + 0.4, "System Information: Jaxlib Version: 0.8.1", where="max_utils.py:833")
    log.add(t + 0.4, "System Information: Jax Backend: PJRT C API", where="max_utils.py:834")
    log.add(t + 0.4, "TFRT TPU v6 lite", bare=True)
    log.add(t + 0.4, "Built on Oct 28 2025 19:47:11 (1761677231) cl/825191020", bare=True)
    log.add(t + 2.1, "number parameters: 0.552 billion", where="metric_logger.py:374")
    log.add(t + 2.3, "Grain pool will use 8 processes.", tid=GRAIN, where="grain_pool.py:508")
    log.add(t + 3.0, "Per train step:", bare=True)
    log.add(t + 3.0, f" Total TFLOPs: {TFLOPS:.2f} ", bare=True)
    log.add(t + 3.0, " split as 93.41% learnable weight flops and 6.59% attention flops",
            bare=True)
    log.add(t + 3.1, "Started a processing pool with 8 workers.", tid=GRAIN,
            where="grain_pool.py:390")
    log.add(t + 3.5, "Total memory size: 1.8 GB, Output size: 0.6 GB, Temp size: 0.9 GB, "
            "Argument size: 0.6 GB, Host temp size: 0.0 GB.", where="max_utils.py:1120")


def step_line(step: int, seconds: float, loss: float) -> str:
    tflops = TFLOPS / seconds
    tokens = 4 * 2048 / seconds
    return (f"completed step: {step}, seconds: {seconds:.3f}, TFLOP/s/device: {tflops:.3f}, "
            f"Tokens/s/device: {tokens:.3f}, total_weights: 32768, loss: {loss:.3f}")


def memstats(log: Log, t: float, label: str) -> None:
    log.add(t, "", where="max_utils.py:779")
    log.add(t, f"Memstats: {label}:", bare=True)
    for i, used in enumerate((0.61, 0.58)):
        log.add(t, f"\tUsing (GB) {used} / 31.25 ({used / 31.25:%}) on "
                f"TPU_{i}(process=0,({i},0,0,0))", where="max_utils.py:785")


def blocking_lines(log: Log, now: float, blocking_s: float) -> None:
    """Orbax's lines at the end of an async save's blocking part (``now``), on the training
    thread: the Pytree handler's (base_pytree_checkpoint_handler.py, ``async_save``), then
    the composite handler's around it (MaxText saves ``Composite(items=..., iter=...)``)."""
    ready, others = 0.021345, 0.003102
    log.add(now, "[process=0][thread=MainThread] Initiated Pytree async_save. Time taken: "
            f"{blocking_s:f}s (batch_requests_ready={ready:f}s, total_serialization_initiated="
            f"{blocking_s - ready - others:f}s, others={others:f}s)",
            where="base_pytree_checkpoint_handler.py:758")
    items = blocking_s + 0.000412
    log.add(now + 0.002, "[process=0][thread=MainThread] Initiated "
            f"CompositeCheckpointHandler.async_save. Time taken: {items + 0.002811:f}s "
            f"(all_items={items:f}s, per_item={{'items': '{blocking_s:.8f}', 'iter': "
            f"'0.00041200'}}, temp_paths=0.002811)", where="composite_checkpoint_handler.py:719")


def run(times: list[float], save_s: dict[int, float], blocking_s: dict[int, float],
        bare_steps: bool, path: pathlib.Path, wait_step_s: float = 0.31,
        loss0: float = 10.873) -> None:
    """Write one log. ``times[k]`` is step k's own time (before any save wait lands in it);
    ``blocking_s[k]`` how long the save of step k's checkpoint blocks the training thread
    (copying the state off the device); ``save_s[k]`` how long its background thread runs."""
    log = Log()
    preamble(log, 0.0)
    before = 5.0                      # T_{k-1}: the host finished dispatching the last step
    blocked = 0.0                     # host time after T_{k-1} spent on step k-1's checkpoint
    save_done: dict[int, float] = {}  # when each save's background thread finished
    measured: list[float] = []
    for k, own in enumerate(times):
        end = before + blocked + own  # T_k
        measured.append(end - before)
        now = end
        if k % PERIOD == 0:
            # maxtext checkpointing.maybe_save_checkpoint, then orbax CheckpointManager.save
            log.add(now, f"Waiting for step {k} to finish before checkpoint...",
                    where="checkpointing.py:969")
            now += wait_step_s
            log.add(now, f"Waited {wait_step_s} seconds for step {k} to finish before "
                    "starting checkpointing.", where="checkpointing.py:973")
            previous = [d for s, d in save_done.items() if s < k and d > now]
            if previous:
                waited = max(previous) - now
                now = max(previous)
                log.add(now, f"Waiting for previous save to complete took {waited:f} seconds. "
                        "If this number is high, consider checkpointing less frequently.",
                        level="W", where="checkpoint_manager.py:1467")
            now += blocking_s[k]
            blocking_lines(log, now, blocking_s[k])
            now += 0.004
            log.add(now, "[process=0][thread=async_save] Background save thread started. "
                    "Deadline for this save operation is "
                    f"{START + datetime.timedelta(seconds=now + 1200):%Y-%m-%d %H:%M:%S.%f}",
                    tid=ASYNC, where="async_checkpointer.py:77")
            log.add(now + 0.001, f"Started an asynchronous checkpoint save for step {k}",
                    where="checkpointing.py:451")
            done = now + save_s[k]
            save_done[k] = done
            log.add(done - 0.4, "[process=0][thread=async_save] 1 Handler Commit operations "
                    f"completed. Time taken: {save_s[k] - 0.4:f}s.", tid=ASYNC,
                    where="async_checkpointer.py:91")
            log.add(done, "[process=0][thread=async_save] Background save thread done. "
                    f"Time taken: {save_s[k]:f}s.", tid=ASYNC, where="async_checkpointer.py:169")
        if k == 0:
            memstats(log, now + 0.05, "After params initialized")
            now += 0.05
        if k > 0:  # one-step lag: step k-1's line is written now
            loss = loss0 - 0.05 * (k - 1)
            now += 0.003
            log.add(now, step_line(k - 1, measured[k - 1], loss),
                    where="metric_logger.py:181", bare=bare_steps)
        if k % 7 == 3:
            log.add(end - own / 2, "Grain worker 3 is slow to respond", level="W",
                    tid=GRAIN, where="grain_pool.py:512")
        blocked = now - end
        before = end
    t = before + blocked
    last = len(times) - 1
    log.add(t + 0.2, step_line(last, measured[last], loss0 - 0.05 * last),
            where="metric_logger.py:181", bare=bare_steps)
    log.add(t + 0.3, "[process=0][thread=MainThread] Waiting for background save "
            "thread=async_save.", where="async_checkpointer.py:308")
    log.write(path)


def main() -> None:
    rng = np.random.default_rng(12)
    a = list(0.235 * (1 + 0.01 * rng.standard_normal(STEPS)))
    a[0] = 41.730
    a[55], a[56] = 1.583, 0.041
    run(a, {0: 18.7, 20: 3.1, 40: 2.9}, {0: 9.840213, 20: 0.412731, 40: 0.412731},
        bare_steps=False, path=HERE / "maxtext_a.log")
    b = list(0.2356 * (1 + 0.01 * rng.standard_normal(STEPS)))
    b[0] = 42.118
    run(b, {0: 4.1, 20: 3.9, 40: 4.2}, {0: 0.412731, 20: 0.412731, 40: 0.412731},
        bare_steps=True, path=HERE / "maxtext_b.log", loss0=10.871)


if __name__ == "__main__":
    main()
