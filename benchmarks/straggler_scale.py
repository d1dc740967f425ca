"""Each host's summary and process 0's straggler analysis at pod scale, on simulated hosts.

Simulates H hosts x S steps (default 10,000 x 1,000): every host's steady steps (step time,
data wait; one straggler, five synchronized stalls) and its loader setting. Times:

  build:    per host, reduce its S steps to the bounded HostSummary and serialize it to the
            JSON string that goes into JAX's key-value store (what each host pays once, at
            the end of its run); every host's payload is built;
  analyze:  on process 0, parse the H payloads and run the straggler analysis.

Side by side in the same run, each against the computation it replaced (checked to give the
same records): the build of the first ``--compare-hosts`` hosts with every bootstrap
resample's median taken from its gathered values (``stats._gathered_medians``, the path
before the coverage medians), alternating with today's; and the parse of all payloads by
the record reader before it built its converters once per type (``_reference_from_dict``
below, the old ``records.base`` code), alternating with today's. It prints the payload per
host (bytes; it does not grow with S), the times, and the ratios.

    python benchmarks/straggler_scale.py [--hosts 10000] [--steps 1000] [--compare-hosts 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import time
import types
import typing
from typing import Any, Mapping

import numpy as np

from pipecheck import stats
from pipecheck.analysis import straggler
from pipecheck.records import base
from pipecheck.records.common import Estimate
from pipecheck.records.hosts import HostLoader, HostSummary

STEP_S = 0.100
"""Simulated step time (every host's, under SPMD)."""


def host_run(p: int, hosts: int, steps: int, stall_steps: np.ndarray
             ) -> tuple[list[tuple[int, float, float]], HostLoader]:
    """Host ``p``'s steps (step, step time, data wait) and its loader setting."""
    rng = np.random.default_rng([0, p])
    slow = p == hosts // 3
    times = STEP_S * (1 + 0.03 * rng.standard_normal(steps))
    waits = np.abs(0.002 * (1 + 0.2 * rng.standard_normal(steps)))
    if slow:
        waits += 0.040
    times[stall_steps] += 0.5
    waits[stall_steps] += 0.5
    batches = (0.095 if slow else 0.030) * (1 + 0.05 * rng.standard_normal(64))
    est = Estimate.of_mean(list(batches))
    loader = HostLoader(2, 1, est.value, est.low, est.high, 1.0)
    return list(zip(range(steps), times.tolist(), waits.tolist(), strict=True)), loader


def build(p: int, run: tuple[list, HostLoader]) -> tuple[str, HostSummary]:
    steps, loader = run
    summary = straggler.summarize_host(p, f"host{p}", [loader], steps)
    return json.dumps(summary.to_dict()), summary


def build_gathered(p: int, run: tuple[list, HostLoader]) -> tuple[str, HostSummary]:
    """``build`` with every resample's median from its gathered values."""
    before = stats.COVERAGE_MIN_RESAMPLES
    stats.COVERAGE_MIN_RESAMPLES = 10**9
    try:
        return build(p, run)
    finally:
        stats.COVERAGE_MIN_RESAMPLES = before


def _reference_convert_in(tp: Any, value: Any, where: str = "value") -> Any:
    """``records.base._convert_in`` before its converters were built once per type."""
    if value is None:
        return math.nan if tp is float else None
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _reference_convert_in(typing.get_args(tp)[0], value, where)
    if origin in (typing.Union, types.UnionType):
        args = tuple(a for a in typing.get_args(tp) if a is not type(None))
        return _reference_convert_in(args[0], value) if len(args) == 1 else value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _reference_from_dict(tp, value)
    if origin is tuple:
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        if inner is float and isinstance(value, list):
            return tuple(math.nan if v is None else float(v) for v in value)
        return tuple(_reference_convert_in(inner, v) for v in value)
    if tp is float and isinstance(value, (int, float)):
        return float(value)
    return value


def _reference_from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    """``records.base.from_dict`` before (the parts a HostSummary uses)."""
    if not isinstance(data, Mapping):
        raise TypeError(cls.__name__)
    hints = base._hints(cls)
    names = frozenset(f.name for f in dataclasses.fields(cls) if f.init)
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise KeyError(key)
        kwargs[key] = _reference_convert_in(hints[key], value, f"{cls.__name__}.{key}")
    return cls(**kwargs)


def _median_ms(values: list[float]) -> float:
    return 1e3 * statistics.median(values)


def compare_builds(runs: list, n: int) -> tuple[list[float], list[float]]:
    """Per-host build times of today's and the gathered bootstrap, alternating which goes
    first; the payloads must be equal."""
    new, old = [], []
    for p in range(n):
        pair = [(build, new), (build_gathered, old)]
        payloads = []
        for fn, times in (pair if p % 2 == 0 else pair[::-1]):
            t0 = time.perf_counter()
            payloads.append(fn(p, runs[p])[0])
            times.append(time.perf_counter() - t0)
        assert payloads[0] == payloads[1], f"host {p}: the summaries differ"
    return new, old


def compare_parses(payloads: list[str], repeats: int
                   ) -> tuple[list[float], list[float], list[float], Any]:
    """Parse times (today's, the reference's) and analysis times over all payloads,
    alternating which parser goes first; the parsed records must be equal."""
    parse, parse_ref, analyze = [], [], []
    result = None
    for r in range(repeats):
        readers = [(HostSummary.from_dict, parse),
                   (lambda d: _reference_from_dict(HostSummary, d), parse_ref)]
        parsed = []
        for read, times in (readers if r % 2 == 0 else readers[::-1]):
            t0 = time.perf_counter()
            parsed.append([read(json.loads(s)) for s in payloads])
            times.append(time.perf_counter() - t0)
        assert parsed[0] == parsed[1], "the parsed summaries differ"
        t0 = time.perf_counter()
        result = straggler.analyze(parsed[0])
        analyze.append(time.perf_counter() - t0)
    return parse, parse_ref, analyze, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--compare-hosts", type=int, default=64,
                    help="hosts whose build is also timed with the gathered bootstrap")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    stall_steps = np.random.default_rng(1).choice(np.arange(10, args.steps), size=5,
                                                  replace=False)
    n_cmp = min(args.compare_hosts, args.hosts)
    runs = [host_run(p, args.hosts, args.steps, stall_steps) for p in range(n_cmp)]
    new, old = compare_builds(runs, n_cmp)
    payloads, build_s = [], []
    for p in range(args.hosts):  # every host's payload, as the pod would build them
        run = runs[p] if p < n_cmp else host_run(p, args.hosts, args.steps, stall_steps)
        t0 = time.perf_counter()
        payloads.append(build(p, run)[0])
        build_s.append(time.perf_counter() - t0)
    parse, parse_ref, analyze, result = compare_parses(payloads, args.repeats)
    sizes = [len(s) for s in payloads]
    print(f"{args.hosts} hosts x {args.steps} steps; payload per host "
          f"{statistics.median(sizes):.0f} bytes (max {max(sizes)}), "
          f"{sum(sizes) / 2**20:.2f} MiB for all hosts")
    print("each host's summary (build + serialize), median per host:")
    print(f"  all {args.hosts} hosts:                    {_median_ms(build_s):7.2f} ms "
          f"({statistics.median(build_s) / STEP_S:.3f} x one {STEP_S * 1e3:.0f} ms step)")
    print(f"  first {n_cmp} hosts, today's:             {_median_ms(new):7.2f} ms")
    print(f"  first {n_cmp} hosts, gathered bootstrap:  {_median_ms(old):7.2f} ms")
    print(f"  gathered / today's (alternating pairs):  "
          f"{statistics.median(o / n for o, n in zip(old, new, strict=True)):.2f}x; "
          "the same payloads")
    total = [p + a for p, a in zip(parse, analyze, strict=True)]
    print(f"process 0, all {args.hosts} hosts (median of {args.repeats}):")
    print(f"  parse, today's:              {_median_ms(parse):7.0f} ms")
    print(f"  parse, reference reader:     {_median_ms(parse_ref):7.0f} ms "
          f"({statistics.median(parse_ref) / statistics.median(parse):.1f}x today's; the same "
          "records)")
    print(f"  straggler analysis:          {_median_ms(analyze):7.0f} ms")
    print(f"  parse + analysis:            {_median_ms(total):7.0f} ms "
          f"({statistics.median(total) / STEP_S:.1f} x one {STEP_S * 1e3:.0f} ms step, once "
          "per run)")
    s = result.straggler
    print(f"straggler: {None if s is None else s.process_id} (simulated: {args.hosts // 3}); "
          f"findings: {[f.kind for f in result.findings]}")


if __name__ == "__main__":
    main()
