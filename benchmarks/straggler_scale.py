"""The gather payload and the straggler analysis at scale, on simulated hosts.

Simulates H hosts x S steps (default 1,024 x 1,000): every host's steady steps (step time,
data wait; one straggler, a few synchronized stalls) and its loader setting. Times, side by
side on the same data:

  build:    per host, reduce its S steps to the bounded HostSummary and serialize it to
            the JSON string that goes into JAX's key-value store (what each host pays once);
  analyze:  on process 0, parse the H payloads and run the straggler analysis;

and prints the payload per host (bytes; it does not grow with S), the build time per host,
the analysis time for all hosts, and the analysis time as a ratio to one step of the
simulated run (the job pays it once, after the run).

    python benchmarks/straggler_scale.py [--hosts 1024] [--steps 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from pipecheck.analysis import straggler
from pipecheck.records.common import Estimate
from pipecheck.records.hosts import HostLoader, HostSummary

STEP_S = 0.100
"""Simulated step time (every host's, under SPMD)."""


def simulate(hosts: int, steps: int, seed: int = 0) -> list[tuple[list, HostLoader]]:
    rng = np.random.default_rng(seed)
    slow = hosts // 3
    stall_steps = rng.choice(np.arange(10, steps), size=5, replace=False)
    out = []
    for p in range(hosts):
        times = STEP_S * (1 + 0.03 * rng.standard_normal(steps))
        waits = np.abs(0.002 * (1 + 0.2 * rng.standard_normal(steps)))
        if p == slow:
            waits += 0.040
        times[stall_steps] += 0.5
        waits[stall_steps] += 0.5
        batches = (0.095 if p == slow else 0.030) * (1 + 0.05 * rng.standard_normal(64))
        est = Estimate.of_mean(list(batches))
        loader = HostLoader(2, 1, est.value, est.low, est.high, 1.0)
        out.append(([(i, float(t), float(w)) for i, (t, w) in enumerate(zip(times, waits,
                                                                            strict=True))],
                    loader))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    data = simulate(args.hosts, args.steps)
    build_s, analyze_s, sizes = [], [], []
    result = None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        payloads = [json.dumps(straggler.summarize_host(p, f"host{p}", [loader], steps)
                               .to_dict()) for p, (steps, loader) in enumerate(data)]
        t1 = time.perf_counter()
        hosts = [HostSummary.from_dict(json.loads(s)) for s in payloads]
        result = straggler.analyze(hosts, (2, 1))
        t2 = time.perf_counter()
        build_s.append((t1 - t0) / args.hosts)
        analyze_s.append(t2 - t1)
        sizes = [len(s) for s in payloads]
    assert result is not None
    build, analyze = statistics.median(build_s), statistics.median(analyze_s)
    print(f"{args.hosts} hosts x {args.steps} steps (median of {args.repeats} repeats)")
    print(f"payload per host:            {statistics.median(sizes):.0f} bytes "
          f"(max {max(sizes)}), {sum(sizes) / 2**20:.2f} MiB for all hosts")
    print(f"build + serialize, per host: {build * 1e3:.2f} ms "
          f"({build / STEP_S:.3f} x one {STEP_S * 1e3:.0f} ms step)")
    print(f"parse + analyze, all hosts:  {analyze * 1e3:.0f} ms "
          f"({analyze / STEP_S:.1f} x one {STEP_S * 1e3:.0f} ms step, once per run)")
    s = result.straggler
    print(f"straggler: {None if s is None else s.process_id} (simulated: {args.hosts // 3}); "
          f"findings: {[f.kind for f in result.findings]}")


if __name__ == "__main__":
    main()
