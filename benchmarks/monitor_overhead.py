"""Overhead of pipecheck.Monitor: a bare lagged-sync loop vs the same loop under Monitor.

    PYTHONPATH=. python benchmarks/monitor_overhead.py [--rounds 9] [--steps 150]
        [--baseline DIR] [--save-steps 1000000]

1. End to end: a jitted matmul-chain step (tens of ms on a 2-core CPU), the same
   batches, bare and under Monitor (sync locator, gc and compile watchers on),
   alternating, round by round. Prints the median ratio monitored / bare.
2. Host cost per step: the same loops with a step that does no device work, so only the
   Monitor's machinery is timed (µs per step over a bare loop, in the loop and with
   ``finish`` included), with and without the sync locator; and the cost of a span: a
   ``with`` block that only reads the clock twice (the floor any span pays) against
   ``SpanRecorder.span`` with annotations off and on, and ``Monitor.span`` (the user's
   call, annotations on, the sync locator off: its thread's samples would land in any
   timing), while no profiler captures; and a span as a loop pays for it, everything
   included (the fold of the log into steps, ``finish``): the Monitor loop with
   ``SPANS_PER_STEP`` empty spans a step against the same loop without them, and the same
   again once the process has run 20 Monitor loops (its memory no longer fresh, as in a
   long training process: the floats a span logs lie scattered, and cost more to read).
   With ``--baseline DIR`` (another checkout of pipecheck, e.g. before a change) part 2
   runs in subprocesses for both trees, alternating, and prints before / after.
3. ``Monitor(save_to=...)`` on a ``--save-steps`` loop of that step: wall time without
   ``save_to``, at the default interval, and at a short one (many writes), alternating;
   the time a write takes on the loop's thread (capture) and on the writer's, and the
   process's memory along the loop (it must stay flat).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import psutil

from pipecheck import Monitor
from pipecheck.measure.spans import SpanRecorder

ITERS = 120

SPANS_PER_STEP = 4
"""User spans a step in the loop that prices a span with everything it costs later (the
fold of the log into steps, ``finish``): its cost over the same loop without them. The four
``with`` blocks are written out, as in a user's loop: a ``for`` over them would add its own
iteration (~20 ns) to each span."""


@jax.jit
def train_step(w, x):
    h = jax.lax.fori_loop(0, ITERS, lambda _, a: jnp.tanh(a @ w), x)
    loss = jnp.mean(h * h)
    return w - 1e-6 * loss, {"loss": loss}


def null_step(w, x):
    return w, {"loss": 0.0}


def bare(step, w, batches):
    prev = None
    for x in batches:
        w, metrics = step(w, x)
        if prev is not None:
            float(prev)
        prev = metrics["loss"]
    float(prev)


def monitored(step, w, batches, **kw):
    mon = Monitor(env={"benchmark": True}, **kw)
    for x in mon.batches(batches):
        w, metrics = mon.step(step, w, x)
    mon.finish()


def monitored_split(step, w, batches, spans=False, **kw) -> tuple[float, float]:
    """(seconds in the loop, seconds in ``finish``); with ``spans``, ``SPANS_PER_STEP`` empty
    user spans after each step."""
    mon = Monitor(env={"benchmark": True}, **kw)
    span = mon.span
    t0 = time.perf_counter()
    if spans:
        for x in mon.batches(batches):
            w, metrics = mon.step(step, w, x)
            with span("log"):
                pass
            with span("log"):
                pass
            with span("log"):
                pass
            with span("log"):
                pass
    else:
        for x in mon.batches(batches):
            w, metrics = mon.step(step, w, x)
    t1 = time.perf_counter()
    mon.finish()
    return t1 - t0, time.perf_counter() - t1


def timed(fn, *args, **kw) -> float:
    t0 = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - t0


def end_to_end(rounds: int, steps: int) -> float:
    rng = np.random.default_rng(0)
    batches = [jnp.asarray(rng.standard_normal((64, 256), dtype=np.float32))
               for _ in range(steps)]
    w = jnp.eye(256, dtype=jnp.float32) * 0.5
    bare(train_step, w, batches[:3])  # compile once, outside the timings
    ratios, aa, bare_times = [], [], []
    for _ in range(rounds):
        tb = timed(bare, train_step, w, batches)
        tm = timed(monitored, train_step, w, batches)
        tb2 = timed(bare, train_step, w, batches)
        bare_times += [tb / steps, tb2 / steps]
        ratios.append(tm / tb)
        aa.append(tb2 / tb)
    step_ms = 1e3 * statistics.median(bare_times)
    print(f"end to end: {rounds} rounds x {steps} steps (bare, Monitor, bare), "
          f"bare step {step_ms:.1f} ms")
    for label, xs in (("monitored / bare", ratios), ("bare / bare (noise floor)", aa)):
        q = statistics.quantiles(xs, n=4)
        print(f"  {label:26s} median {statistics.median(xs):.4f} "
              f"({100 * (statistics.median(xs) - 1):+.2f}%), IQR {q[0]:.4f}..{q[2]:.4f}")
    return step_ms


class _Floor:
    """The least a span can cost: a ``with`` block that reads the clock twice and keeps
    the two readings."""

    __slots__ = ("t0", "log")

    def __init__(self) -> None:
        self.log: list[tuple[float, float]] = []

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.log.append((self.t0, time.perf_counter()))


AGED_PAIRS = 12
"""Loops with and without spans timed, in pairs, once the process has run 20 Monitor loops."""


def aged_span_costs(items: list[int]) -> list[float]:
    """Seconds a span costs all-in (as ``span in the loop``) in a process that has already
    run other Monitor loops, so its memory is no longer fresh, as in a long training
    process: each pair alternates which loop runs first."""
    costs = []
    for i in range(AGED_PAIRS):
        split = {}
        for spans in ((False, True) if i % 2 else (True, False)):
            split[spans] = sum(monitored_split(null_step, 0, items, spans=spans))
        costs.append((split[True] - split[False]) / len(items) / SPANS_PER_STEP)
    return costs


def host_costs(n: int = 20_000, m: int = 200_000) -> dict[str, float]:
    """Microseconds: per step (bare; Monitor in the loop and with finish; without the sync
    locator) and per span (floor, annotate off, annotate on, Monitor.span)."""
    items = list(range(n))
    runs: dict[str, list[float]] = {k: [] for k in (
        "bare", "loop", "loop+finish", "loop, no locator", "loop+finish, no locator",
        "span in the loop")}
    for _ in range(5):
        runs["bare"].append(timed(bare, null_step, 0, items) / n)
        loop, fin = monitored_split(null_step, 0, items)
        runs["loop"].append(loop / n)
        runs["loop+finish"].append((loop + fin) / n)
        with_spans = sum(monitored_split(null_step, 0, items, spans=True))
        runs["span in the loop"].append((with_spans - loop - fin) / n / SPANS_PER_STEP)
        loop, fin = monitored_split(null_step, 0, items, locate_syncs=False)
        runs["loop, no locator"].append(loop / n)
        runs["loop+finish, no locator"].append((loop + fin) / n)
    runs["span in the loop, aged"] = aged_span_costs(items)
    out = {k: 1e6 * statistics.median(v) for k, v in runs.items()}
    floor = _Floor()
    spans: dict[str, list[float]] = {"span floor": [], "span annotate off": [],
                                     "span annotate on": [], "Monitor.span": []}
    for _ in range(5):
        gc.collect()  # each loop starts with no earlier loop's recorder alive
        t0 = time.perf_counter()
        for _ in range(m):
            with floor:
                pass
        spans["span floor"].append((time.perf_counter() - t0) / m)
        floor.log.clear()
        for annotate in (False, True):
            rec = SpanRecorder(annotate=annotate)
            rec.start()
            t0 = time.perf_counter()
            for _ in range(m):
                with rec.span("log"):
                    pass
            spans[f"span annotate {'on' if annotate else 'off'}"].append(
                (time.perf_counter() - t0) / m)
            del rec
            gc.collect()
        mon = Monitor(env={"benchmark": True}, locate_syncs=False)
        mon.step(null_step, 0, 0)
        t0 = time.perf_counter()
        for _ in range(m):
            with mon.span("log"):
                pass
        spans["Monitor.span"].append((time.perf_counter() - t0) / m)
        mon.step(null_step, 0, 0)
        mon.finish()
        del mon
    # the least of 5 (timeit's rule): a span costs nanoseconds, any pause only adds
    out.update({k: 1e6 * min(v) for k, v in spans.items()})
    return out


def print_host(costs: dict[str, float], step_ms: float | None) -> None:
    base = costs["bare"]
    print("host cost per step (a step with no device work, 20000 steps, median of 5):")
    print(f"  {'bare':31s} {base:6.2f} us/step")
    for k in ("loop", "loop+finish", "loop, no locator", "loop+finish, no locator"):
        print(f"  Monitor {k:23s} {costs[k]:6.2f} us/step  (+{costs[k] - base:.2f} over bare)")
    if step_ms:
        print(f"  = {100 * (costs['loop+finish'] - base) / (1e3 * step_ms):.3f}% of the "
              f"{step_ms:.1f} ms step above")
    print(f"  a span in that loop ({SPANS_PER_STEP} a step, the fold and finish included) "
          f"{1e3 * costs['span in the loop']:5.0f} ns")
    print(f"  the same once the process has run 20 Monitor loops (median of {AGED_PAIRS}) "
          f"{1e3 * costs['span in the loop, aged']:5.0f} ns")
    print("span (no profiler capturing, least of 5 x 200000):")
    for k in ("span floor", "span annotate off", "span annotate on", "Monitor.span"):
        extra = "" if k == "span floor" else \
            f"  (+{1e3 * (costs[k] - costs['span floor']):.0f} ns over the floor)"
        print(f"  {k:20s} {1e3 * costs[k]:5.0f} ns{extra}")


def before_after(baseline: str, rounds: int) -> None:
    """Part 2 for ``baseline``'s pipecheck and this one, alternating, in subprocesses."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"before": os.path.abspath(baseline), "after": here}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for _ in range(rounds):
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--host-json"],
                               capture_output=True, text=True, env=env, check=True)
            got[label].append(json.loads(r.stdout.splitlines()[-1]))
    print(f"before ({trees['before']}) / after ({trees['after']}), "
          f"median of {rounds} alternating runs:")
    print(f"  {'':44s} {'before':>8s} {'after':>8s} {'after/before':>12s}")
    for key in ("loop", "loop+finish", "loop, no locator", "loop+finish, no locator",
                "span annotate off", "span annotate on", "Monitor.span", "span in the loop",
                "span in the loop, aged", "span floor"):
        per_step = key.startswith("loop")
        b = statistics.median(x[key] - (x["bare"] if per_step else 0) for x in got["before"])
        a = statistics.median(x[key] - (x["bare"] if per_step else 0) for x in got["after"])
        unit = "us/step over bare" if per_step else "us/span"
        print(f"  {key + ' (' + unit + ')':44s} {b:8.2f} {a:8.2f} {a / b:12.3f}")


def save_costs(steps: int, short_s: float, rounds: int) -> None:
    """Part 3: Monitor(save_to=...) on a long loop of the null step."""
    from pipecheck.monitor.run_saver import SAVE_EVERY_S

    proc = psutil.Process()
    items = range(steps)
    with tempfile.TemporaryDirectory() as tmp:
        def run(every: float | None) -> tuple[float, Monitor, list[float]]:
            kw = {} if every is None else {"save_to": os.path.join(tmp, "run.json"),
                                           "save_every_s": every, "force": True}
            mon = Monitor(env={"benchmark": True}, **kw)
            rss = []
            t0 = time.perf_counter()
            for i, x in enumerate(mon.batches(items)):
                mon.step(null_step, 0, x)
                if i % (steps // 10) == 0:
                    rss.append(proc.memory_info().rss / 2**20)
            mon.finish()
            return time.perf_counter() - t0, mon, rss

        walls: dict[str, list[float]] = {"none": [], "default": [], "short": []}
        writes: dict[str, list[tuple[int, float]]] = {"default": [], "short": []}
        rss_seen: list[float] = []
        compressed = (0, 0)
        cases = [("none", None), ("default", SAVE_EVERY_S), ("short", short_s)]
        for r in range(rounds):
            # each round starts with another case: no case always runs first
            for label, every in cases[r % 3:] + cases[:r % 3]:
                wall, mon, rss = run(every)
                walls[label].append(wall)
                if mon._saver is not None:
                    writes[label].append((mon._saver.writes, mon._saver.write_s))
                if label == "short":
                    compressed = (mon._encoder.compressed_bytes, mon._encoder.column_bytes)
                if label == "default":
                    rss_seen = rss
        none = statistics.median(walls["none"])
        print(f"Monitor(save_to=...) on a {steps:,}-step loop (a step with no device work), "
              f"median of {rounds} rounds, each starting with another case:")
        print(f"  {'no save_to':26s} {none:7.2f} s")
        for label, every in (("default", SAVE_EVERY_S), ("short", short_s)):
            wall = statistics.median(walls[label])
            n = statistics.median(w for w, _ in writes[label])
            writer = statistics.median(s for _, s in writes[label])
            print(f"  {f'save_every_s={every:g}':26s} {wall:7.2f} s  "
                  f"(x{wall / none:.4f}; {n:.0f} writes, {writer:.2f} s on the writer)")
        print(f"  step columns compressed over the short interval's writes: "
              f"{compressed[0] / 2**20:.1f} MB of the {compressed[1] / 2**20:.1f} MB written "
              "(the rest reused from earlier writes)")
        mon = Monitor(env={"benchmark": True})
        for x in mon.batches(range(20_000)):
            mon.step(null_step, 0, x)
        t0 = time.perf_counter()
        for _ in range(20):
            state = mon._capture()
        capture = (time.perf_counter() - t0) / 20
        from pipecheck.monitor.result import build_result

        t0 = time.perf_counter()
        result = build_result(state, {"benchmark": True}, {})
        text = mon._encode(result)
        build = time.perf_counter() - t0
        # the next write, 300 steps later (a 100 ms step at the default interval): only the
        # step columns' new pieces are compressed
        for x in mon.batches(range(300)):
            mon.step(null_step, 0, x)
        before = mon._encoder.compressed_bytes, mon._encoder.column_bytes
        again = build_result(mon._capture(), {"benchmark": True}, {})
        t0 = time.perf_counter()
        mon._encoder.table_json(again.steps)
        encode_next = time.perf_counter() - t0
        fresh = Monitor(env={"benchmark": True})._encoder
        t0 = time.perf_counter()
        fresh.table_json(again.steps)
        encode_full = time.perf_counter() - t0
        new = mon._encoder.compressed_bytes - before[0]
        seen = mon._encoder.column_bytes - before[1]
        mon.finish()
        per_write = capture + build
        print(f"  one write of a full window ({len(result.steps):,} steps): capture on the loop's "
              f"thread {1e3 * capture:.1f} ms, build + encode {1e3 * build:.0f} ms "
              f"({len(text) / 2**20:.1f} MB)")
        print(f"  the next write, 300 steps later: {new / 2**10:.0f} KB of the step columns' "
              f"{seen / 2**10:.0f} KB compressed again; encoding {1e3 * encode_next:.1f} ms "
              f"(all of the steps from scratch: {1e3 * encode_full:.1f} ms)")
        print(f"  = {100 * per_write / SAVE_EVERY_S:.3f}% of the wall time at the default "
              f"interval ({SAVE_EVERY_S:g} s), at most one write per interval")
        print("  memory (RSS) along the default-interval loop, MB: "
              + ", ".join(f"{x:.0f}" for x in rss_seen))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--baseline", help="another pipecheck checkout: part 2, before / after")
    ap.add_argument("--baseline-rounds", type=int, default=5)
    ap.add_argument("--save-steps", type=int, default=1_000_000)
    ap.add_argument("--save-rounds", type=int, default=3)
    ap.add_argument("--short-interval", type=float, default=0.5)
    ap.add_argument("--host-json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.host_json:
        print(json.dumps(host_costs()))
        return
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    step_ms = end_to_end(a.rounds, a.steps)
    print_host(host_costs(), step_ms)
    if a.baseline:
        before_after(a.baseline, a.baseline_rounds)
    if a.save_steps:
        save_costs(a.save_steps, a.short_interval, a.save_rounds)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
