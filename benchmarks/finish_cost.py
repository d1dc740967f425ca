"""Cost of ``Monitor.finish()`` at 20,000 and 100,000 steps, and of the periodic-stall
search in it, the per-period search it replaced against the vectorized one.

    PYTHONPATH=. python benchmarks/finish_cost.py [--sizes 20000,100000] [--rounds 5]

For each size, a loop of a step that does no device work runs under a Monitor (JAX's
backend brought up first, as in a training run: a process that never touched JAX pays its
start-up, ~20 ms, in the environment ``finish`` records), then ``finish``. Rounds alternate
the search ``finish`` calls: the vectorized ``find_periodic_stall`` and the per-period one
it replaced (``ref_find`` in ``tests/unit/analysis/test_periodic_stall_fast.py``, the old
code kept as the reference), each on a fresh loop. Printed: ``finish`` (median and least
over the rounds) with each, the search's share of it, and the anomalies' (steady state and
anomaly causes); then both searches alone on the same steps (those ``finish`` looked at:
the last ``STEP_WINDOW`` kept), alternating, with their ratio, and that they found the same
stall. On the shared 2-core machine wall times depend on what else runs: compare within a
run, not across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import jax
import numpy as np

from pipecheck import Monitor
from pipecheck.analysis import periodic_stall as ps
from pipecheck.monitor import result as monitor_result
from tests.unit.analysis.test_periodic_stall_fast import ref_find

SEARCH_REPEATS = 5
"""Runs of each search alone on the same steps, per round (alternating old and new)."""


def null_step(state: int, batch: object) -> tuple[int, dict[str, float]]:
    return state, {"loss": 0.0}


class Timed:
    """Seconds spent in a module-level function, and the arguments of its last call, while
    patched in."""

    def __init__(self, module: Any, name: str, replace: Callable[..., Any] | None = None):
        self.module, self.name = module, name
        self.inner = replace or getattr(module, name)
        self.seconds = 0.0
        self.args: tuple[Any, ...] = ()

    def __call__(self, *args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return self.inner(*args, **kw)
        finally:
            self.seconds += time.perf_counter() - t
            self.args = args

    def __enter__(self) -> Timed:
        self.saved = getattr(self.module, self.name)
        setattr(self.module, self.name, self)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.module, self.name, self.saved)


def finish_once(steps: int, search: Callable[..., Any]) -> dict[str, Any]:
    """One monitored loop of ``steps`` null steps and its ``finish``, with ``search`` as
    the periodic-stall search: seconds of finish, of the search, of the anomalies."""
    mon = Monitor()
    for x in mon.batches(range(steps)):
        mon.step(null_step, 0, x)
    with Timed(ps, "find_periodic_stall", search) as found, \
            Timed(monitor_result, "table_with_anomalies") as anomalies:
        t = time.perf_counter()
        mon.finish()
        total = time.perf_counter() - t
    return {"finish": total, "search": found.seconds, "anomalies": anomalies.seconds,
            "args": found.args}


def same_stall(a: ps.PeriodicStall | None, b: ps.PeriodicStall | None) -> bool:
    """The same stall (or none), its p-value to floating-point tolerance."""
    if a is None or b is None:
        return a is b
    return (a.period, a.phase, a.width, a.stall_steps) == (b.period, b.phase, b.width,
                                                           b.stall_steps) \
        and bool(np.isclose(a.p_value, b.p_value, rtol=1e-9, atol=0))


def ms(values: list[float]) -> str:
    return f"{1e3 * statistics.median(values):7.1f} ms (least {1e3 * min(values):6.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    jax.devices()
    finish_once(2000, ps.find_periodic_stall)  # imports and first calls, untimed
    for steps in (int(s) for s in args.sizes.split(",")):
        runs: dict[str, list[dict[str, Any]]] = {"new": [], "old": []}
        alone: dict[str, list[float]] = {"new": [], "old": []}
        same = True
        for _ in range(args.rounds):
            for name, search in (("new", ps.find_periodic_stall), ("old", ref_find)):
                runs[name].append(finish_once(steps, search))
            numbers, seconds = runs["new"][-1]["args"]
            for _ in range(SEARCH_REPEATS):
                found = {}
                for name, search in (("new", ps.find_periodic_stall), ("old", ref_find)):
                    t = time.perf_counter()
                    found[name] = search(numbers, seconds)
                    alone[name].append(time.perf_counter() - t)
                same &= same_stall(found["new"], found["old"])
        looked = len(runs["new"][-1]["args"][0])
        print(f"{steps} steps ({looked} looked at by the search), {args.rounds} rounds:")
        for name in ("old", "new"):
            r = runs[name]
            print(f"  finish, {name} search: {ms([x['finish'] for x in r])}; in it the "
                  f"search {ms([x['search'] for x in r])}, the anomalies "
                  f"{ms([x['anomalies'] for x in r])}")
        old_f = statistics.median(x["finish"] for x in runs["old"])
        new_f = statistics.median(x["finish"] for x in runs["new"])
        print(f"  finish old / new: {old_f / new_f:.1f}x")
        old_s, new_s = statistics.median(alone["old"]), statistics.median(alone["new"])
        print(f"  the search alone on the same steps: old {ms(alone['old'])}, new "
              f"{ms(alone['new'])}: old / new {old_s / new_s:.1f}x; same stall found: {same}")


if __name__ == "__main__":
    main()
