"""The model-guided search (``analysis.loader.model_tuner``) against the exhaustive grid, on the
calibrated pipelines of ``benchmarks/tuner_joint_search.py``.

Each pipeline's grid (workers 0..--max-workers x read threads 1, 4, 16 x per-worker buffer
1, 2 x read prefetch 1 or 2 per thread: 42 settings at 3 workers) is measured once with real
Grain workers, as ``pipecheck dataloader`` records each setting (resources and stage timing:
what the loader model is fitted to). Then, on that table, the grid's choice (``tuner.choose``
over every setting), the model-guided search (each setting it asks for looked up in the
table) and the joint search (``tuner.tune_grain``, the same way) are compared: trials, the
chosen setting, its D, and the throughput relative to the grid's choice (grid D / chosen D;
1.0 or more where both meet the goal is as good).

    PYTHONPATH=. python benchmarks/model_tuner_vs_grid.py [--max-workers 3] [--batches 20]
        [--only NAME] [--tables FILE] [--replay FILE]
"""

from __future__ import annotations

import os
import sys
import time

from pipecheck.analysis.loader.model_tuner import trial_of, tune_by_model
from pipecheck.analysis.loader.tuner import choose, tune_grain
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.data.grain_pipeline import ensure_absl_flags_parsed
from pipecheck.host_cpus import usable_cores
from pipecheck.measure.dataloader import measure_setting
from pipecheck.measure.loader_search import TUNING_STAGE_WAIT_S, batches_for
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.workloads import resolve
from pipecheck.workloads.calibrated import make_dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the joint-search benchmark's pipelines, ladders and grid: the same scenarios, searched both ways
from grid_tables import Tables, grid_arguments  # noqa: E402
from tuner_joint_search import (  # noqa: E402
    BUFFERS,
    PIPELINES,
    PREFETCH_FACTORS,
    THREADS,
    grid,
)


def measure_table(keys: dict, settings: list[GrainSettings], batches: int
                  ) -> list[LoaderSetting]:
    ds = make_dataset(resolve({"workload": "calibrated", **keys}))
    out = []
    for i, s in enumerate(settings):
        t0 = time.perf_counter()
        out.append(measure_setting(ds, s, batches_for(s.workers, batches, s.per_worker_buffer,
                                                      s.prefetch),
                                   put=None, tokens_key=None,
                                   stage_wait_s=TUNING_STAGE_WAIT_S))
        print(f"  [{i + 1}/{len(settings)}] {s.label()}: D = "
              f"{out[-1].loader_time.value * 1e3:.2f} ms ({time.perf_counter() - t0:.1f} s)",
              file=sys.stderr)
    return out


def compare_searches(name: str, table: list[LoaderSetting], target_s: float, cores: int,
                     max_workers: int) -> None:
    by = {s.settings: s for s in table}
    trials = [trial_of(s) for s in table]
    best, best_ok = choose(trials, target_s)
    model = tune_by_model(lambda g: by[g], target_s, max_workers=max_workers, cores=cores,
                          candidates=list(by))
    joint = tune_grain(lambda g: trial_of(by[g]), target_s, max_workers=max_workers,
                       cores=cores, thread_ladder=THREADS, buffer_ladder=BUFFERS,
                       prefetch_factors=PREFETCH_FACTORS, remeasure=False)
    goal = target_s * LOADER_HEADROOM
    print(f"\n{name}: target T = {target_s * 1e3:.0f} ms (goal D <= {goal * 1e3:.1f} ms); "
          f"fastest on the grid: {min(t.batch_s for t in trials) * 1e3:.2f} ms")
    print(f"{'method':<9} {'trials':>6}  {'setting':<46} {'D ms':>6}  goal  vs grid choice")
    for method, n, chosen in (("grid", len(trials), best),
                              ("model", len(model.trials), model.chosen),
                              ("joint", len(joint.trials), joint.chosen)):
        ok = chosen.batch_s <= goal
        print(f"{method:<9} {n:>6}  {chosen.settings.label():<46} {chosen.batch_s * 1e3:>6.2f}"
              f"  {'yes' if ok else 'no ':<4}  {best.batch_s / chosen.batch_s:.3f}")
    print(f"model: {model.reason}; asked: "
          + ", ".join(t.settings.short_label() for t in model.trials))


def main() -> None:
    args = grid_arguments(__doc__, batches=20, names=list(PIPELINES))
    ensure_absl_flags_parsed()
    cores = usable_cores()
    tables = Tables(args)
    settings = grid(args.max_workers)
    print(f"grid: workers 0..{args.max_workers} x threads {THREADS} x per-worker buffer "
          f"{BUFFERS} x prefetch {PREFETCH_FACTORS} (x threads) = {len(settings)} settings; "
          f"{cores} cores; {args.batches}+ batches per setting")
    for name in [args.only] if args.only else list(PIPELINES):
        keys, target_ms = PIPELINES[name]

        def measure(name=name, keys=keys) -> list[LoaderSetting]:
            print(f"{name}: {keys}", file=sys.stderr)
            return measure_table(keys, settings, args.batches)

        table = tables.table(name, measure)
        compare_searches(f"{name}: {keys}", table, target_ms / 1e3, cores, args.max_workers)


if __name__ == "__main__":
    main()
