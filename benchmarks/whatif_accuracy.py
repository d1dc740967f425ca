"""How well the loader model (``analysis.loader_model``, ``pipecheck whatif``) predicts
settings it did not see.

For each pipeline (the calibrated workload with different cost structures, and the demo)
a grid of settings (workers 0..--max-workers x read threads 1 and 4) is measured once with
real Grain workers (pipecheck's ``measure_setting``, no device_put, resources and stage
timing as ``pipecheck dataloader`` records them). Then, on that measured table:

- first:  the model fitted to the settings a tuner measures first (0, 1 and 2 workers with
          one thread; 4 threads without workers) predicts each other setting;
- loo:    the model fitted to every setting but one predicts that one, for each setting.

It prints, per pipeline, each predicted setting's prediction and measurement with the
relative error |predicted - measured| / measured, and the median and largest error of each
split; a pipeline the model refuses (too noisy, not described) says so instead.

    PYTHONPATH=. python benchmarks/whatif_accuracy.py [--max-workers 3] [--batches 30]
        [--only NAME] [--tables FILE] [--replay FILE]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from pipecheck.analysis import loader_model as lm
from pipecheck.data.grain_pipeline import ensure_absl_flags_parsed
from pipecheck.measure.dataloader import measure_setting
from pipecheck.measure.loader_search import TUNING_STAGE_WAIT_S, batches_for
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.tuned_config import usable_cores
from pipecheck.workloads import REGISTRY, resolve

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_tables import Tables, grid_arguments  # noqa: E402

PIPELINES = {
    # name: (workload, keys)
    "latency": ("calibrated", {"load_ms": 30.0, "cpu_ms": 1.0}),
    "cpu-in-transform": ("calibrated", {"cpu_ms": 8.0}),
    "main-process": ("calibrated", {"load_ms": 20.0, "consumer_ms": 5.0}),
    "large-elements": ("calibrated", {"load_ms": 10.0, "element_kb": 4096.0}),
    "demo": ("demo", {}),
}
THREADS = (1, 4)
FIRST = ((0, 1), (1, 1), (2, 1), (0, 4))
"""(workers, threads) the model sees in the ``first`` split."""


def grid(max_workers: int) -> list[GrainSettings]:
    return [GrainSettings(w, threads=t) for w in range(max_workers + 1) for t in THREADS]


def measure_table(workload: str, keys: dict, settings: list[GrainSettings],
                  batches: int) -> list[LoaderSetting]:
    cfg = resolve({"workload": workload, **keys})
    make = REGISTRY[workload].dataset
    assert make is not None
    ds = make(cfg)
    out = []
    for i, s in enumerate(settings):
        t0 = time.perf_counter()
        m = measure_setting(ds, s, batches_for(s.workers, batches, s.per_worker_buffer,
                                               s.prefetch),
                            put=None, tokens_key=None, stage_wait_s=TUNING_STAGE_WAIT_S)
        out.append(m)
        print(f"  [{i + 1}/{len(settings)}] {s.short_label()}: D = "
              f"{m.loader_time.value * 1e3:.2f} ms ({time.perf_counter() - t0:.1f} s)",
              file=sys.stderr)
    return out


def predict(seen: list[LoaderSetting], unseen: list[LoaderSetting], cores: int
            ) -> list[tuple[LoaderSetting, float, str]] | str:
    """(setting, predicted D, binding) for each unseen setting, or why the model refused."""
    try:
        model = lm.fit_loader_model(seen, cores)
    except lm.NotPredictable as e:
        return str(e)
    out = []
    for s in unseen:
        p = lm.predict_loader(model, s.settings, cores)
        out.append((s, p.interval.value, p.binding))
    return out


def error(s: LoaderSetting, predicted: float) -> float:
    return abs(predicted - s.loader_time.value) / s.loader_time.value


def summary(errors: list[float]) -> str:
    if not errors:
        return "no prediction"
    return (f"median {100 * statistics.median(errors):.1f}%, max {100 * max(errors):.1f}% "
            f"over {len(errors)} settings")


def report(name: str, table: list[LoaderSetting], cores: int) -> dict:
    key = {(s.workers, s.threads): s for s in table}
    seen = [key[k] for k in FIRST if k in key]
    first = predict(seen, [s for s in table if s not in seen], cores)
    print(f"\n{name}: model fitted to {', '.join(s.settings.short_label() for s in seen)}")
    first_errors: list[float] = []
    if isinstance(first, str):
        print(f"  no prediction: {first}")
    else:
        print(f"  {'setting':<28} {'measured ms':>12} {'predicted ms':>13} {'error':>7}  binds")
        for s, p, binding in first:
            first_errors.append(error(s, p))
            print(f"  {s.settings.short_label():<28} {s.loader_time.value * 1e3:>12.2f} "
                  f"{p * 1e3:>13.2f} {100 * first_errors[-1]:>6.1f}%  {binding}")
    loo_errors, refused = [], 0
    for s in table:
        out = predict([t for t in table if t is not s], [s], cores)
        if isinstance(out, str):
            refused += 1
        else:
            loo_errors.append(error(s, out[0][1]))
    print(f"  first:  {summary(first_errors)}")
    print(f"  loo:    {summary(loo_errors)}" + (f"; refused {refused}" if refused else ""))
    return {"first": first_errors, "loo": loo_errors}


def main() -> None:
    args = grid_arguments(__doc__, batches=30, names=list(PIPELINES))
    ensure_absl_flags_parsed()
    cores = usable_cores()
    names = [args.only] if args.only else list(PIPELINES)
    tables = Tables(args)
    print(f"grid: workers 0..{args.max_workers} x threads {THREADS}; {cores} cores; "
          f"{args.batches}+ batches per setting")
    results = {}
    for name in names:
        workload, keys = PIPELINES[name]

        def measure(name=name, workload=workload, keys=keys) -> list[LoaderSetting]:
            print(f"{name}: {workload} {keys}", file=sys.stderr)
            return measure_table(workload, keys, grid(args.max_workers), args.batches)

        table = tables.table(name, measure)
        results[name] = report(f"{name} ({workload} {keys})", table, cores)
    every = [e for r in results.values() for e in r["first"]]
    every_loo = [e for r in results.values() for e in r["loo"]]
    print(f"\nall pipelines, first: {summary(every)}; loo: {summary(every_loo)}")


if __name__ == "__main__":
    main()
