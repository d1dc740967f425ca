"""The adaptive worker search vs an exhaustive sweep vs Grain's pick_performance_config.

On the calibrated, latency-bound pipeline (each batch sleeps --load-ms, as I/O would),
with a target step time T (--target-ms), every method picks a worker count:

- exhaustive: measures every count 0..--max-workers, picks by the same rule as the tuner
  (the fewest workers whose batch time is <= 90% of T; else the fastest);
- adaptive:   pipecheck's tuner (grow by doubling, stop early, bisect);
- grain:      grain.experimental.pick_performance_config (element size and RAM only).

It prints, for each: settings tried, the chosen count, the throughput reached there
(batches/s, re-measured side by side at the end) and the ratio to the exhaustive choice.

    python benchmarks/tuner_vs_exhaustive.py [--load-ms 120] [--target-ms 30] [--max-workers 8]
"""

from __future__ import annotations

import argparse
import os

import grain
import psutil

from pipecheck.analysis.loader.findings import loader_time
from pipecheck.analysis.loader.tuner import Trial, choose, tune
from pipecheck.data.grain_pipeline import IN_PROCESS, build_iter_dataset, ensure_absl_flags_parsed
from pipecheck.measure.dataloader import measure_setting
from pipecheck.measure.loader_search import batches_for
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.workloads import resolve
from pipecheck.workloads.calibrated import make_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load-ms", type=float, default=120.0)
    ap.add_argument("--target-ms", type=float, default=30.0)
    ap.add_argument("--max-workers", type=int, default=8)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    ensure_absl_flags_parsed()
    cfg = resolve({"workload": "calibrated", "load_ms": args.load_ms})
    ds = make_dataset(cfg)
    target = args.target_ms / 1000.0

    def measure(w: int, t: int) -> float:
        s = measure_setting(ds, GrainSettings(w, threads=t), batches_for(w, args.batches),
                            put=None, tokens_key=None, stage_wait_s=0.0)
        return loader_time(s)

    exhaustive = [Trial(GrainSettings(w, threads=args.threads), measure(w, args.threads))
                  for w in range(0, args.max_workers + 1)]
    ex_choice, ex_ok = choose(exhaustive, target)
    adaptive = tune(measure, target, max_workers=args.max_workers,
                    cores=os.cpu_count() or 1, threads=args.threads)
    budget = int(psutil.virtual_memory().available / 2**20 / 2)
    perf = grain.experimental.pick_performance_config(
        build_iter_dataset(ds, IN_PROCESS), ram_budget_mb=budget, max_workers=args.max_workers,
        max_buffer_size=None)
    grain_w = int(perf.multiprocessing_options.num_workers)

    # Throughput at each method's choice, re-measured side by side (3 rounds, rotated).
    chosen = {"exhaustive": ex_choice.workers, "adaptive": adaptive.chosen.workers,
              "grain": grain_w}
    rate: dict[str, list[float]] = {k: [] for k in chosen}
    for r in range(3):
        names = list(chosen)[r:] + list(chosen)[:r]
        for name in names:
            rate[name].append(1.0 / measure(chosen[name], args.threads))
    best = sorted(rate["exhaustive"])[1]
    print(f"latency-bound pipeline: load_ms={args.load_ms:g} per batch, target T = "
          f"{args.target_ms:g} ms (goal: <= {0.9 * args.target_ms:.1f} ms/batch), "
          f"max_workers={args.max_workers}, {os.cpu_count()} cores")
    print("exhaustive sweep (ms/batch): " + ", ".join(
        f"{t.workers}:{t.batch_s * 1e3:.1f}" for t in exhaustive))
    print(f"{'method':<12}{'trials':>8}{'workers':>9}{'batches/s':>11}{'vs exhaustive':>15}")
    trials = {"exhaustive": len(exhaustive), "adaptive": len(adaptive.trials), "grain": 0}
    for name in chosen:
        r = sorted(rate[name])[1]
        print(f"{name:<12}{trials[name]:>8}{chosen[name]:>9}{r:>11.1f}{r / best:>15.3f}")
    print(f"adaptive trials: {[t.workers for t in adaptive.trials]} "
          f"({len(adaptive.trials)}/{len(exhaustive)} = "
          f"{len(adaptive.trials) / len(exhaustive):.2f} of the sweep); "
          f"scaling: {adaptive.scaling}; stop: {adaptive.reason}")
    print(f"exhaustive choice meets the goal: {ex_ok}; adaptive: {adaptive.meets_target}")


if __name__ == "__main__":
    main()
