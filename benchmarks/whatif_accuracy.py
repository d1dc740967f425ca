"""How well the loader model (``analysis.loader.loader_model``, ``pipecheck whatif``) predicts
settings it did not see.

For each pipeline (the calibrated workload with different cost structures, and the demo)
a grid of settings (workers 0..--max-workers x read threads 1 and 4) is measured --rounds
times, interleaved, with real Grain workers (pipecheck's ``measure_setting``, no device_put,
resources and stage timing as ``pipecheck dataloader`` records them), each setting's window
at least --seconds long (sized by a first pass of --batches). Each round's common slow-down
of the machine (the median over the settings of a setting's D that round against its
median D) is divided out of that round's readings, and each setting's median round is then
its reading (``round_adjusted``). Then, on that measured table:

- first:  the model fitted to the settings a tuner measures first (0, 1 and 2 workers with
          one thread; 4 threads without workers) predicts each other setting;
- loo:    the model fitted to every setting but one predicts that one, for each setting.

It prints, per pipeline, each predicted setting's prediction and measurement with the
relative error |predicted - measured| / measured, and the median and largest error of each
split; a pipeline the model refuses (too noisy, not described) says so instead. With more
than one round it also prints the rounds' slow-downs, how far the same setting's readings
spread over the rounds after them and as read (the machine's own reproducibility, a floor
under any model's error), the errors on each setting's median round as read, and each
round's errors alone.

    PYTHONPATH=. python benchmarks/whatif_accuracy.py [--max-workers 3] [--batches 30]
        [--seconds 2.0] [--rounds 5] [--only NAME] [--tables FILE] [--replay FILE]
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sys
import time

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.data.grain_pipeline import InputPipeline, ensure_absl_flags_parsed
from pipecheck.host_cpus import usable_cores
from pipecheck.measure.dataloader import measure_setting
from pipecheck.measure.loader_search import TUNING_STAGE_WAIT_S, batches_for
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
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


def pipeline(workload: str, keys: dict) -> InputPipeline:
    """The workload's input pipeline with ``keys`` set."""
    make = REGISTRY[workload].dataset
    assert make is not None
    return make(resolve({"workload": workload, **keys}))


def measure_rounds(ds: InputPipeline, settings: list[GrainSettings], batches: int,
                   rounds: int, seconds: float) -> list[list[LoaderSetting]]:
    """The grid measured ``rounds`` times, interleaved (each round the whole grid, every
    other round in reverse order), so that a slower spell of the machine falls on every
    setting rather than on the few measured during it. A first pass of ``batches`` per
    setting, not kept, sizes each setting's window to at least ``seconds`` (2 ms batches
    otherwise give a window of a tenth of a second, which one scheduling hiccup moves);
    with ``seconds`` 0 every setting times ``batches``, as compare's search does."""

    def one(s: GrainSettings, n: int, label: str) -> LoaderSetting:
        t0 = time.perf_counter()
        m = measure_setting(ds, s, batches_for(s.workers, n, s.per_worker_buffer, s.prefetch),
                            put=None, tokens_key=None, stage_wait_s=TUNING_STAGE_WAIT_S)
        print(f"  {label} {s.short_label()}: {n} batches, D = {m.loader_time.value * 1e3:.2f} "
              f"ms ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        return m

    def sized(s: GrainSettings) -> int:
        d = one(s, batches, "sizing").loader_time.value
        return max(batches, math.ceil(seconds / d)) if math.isfinite(d) and d > 0 else batches

    counts = [sized(s) for s in settings] if seconds > 0 else [batches] * len(settings)
    out: list[list[LoaderSetting | None]] = [[None] * len(settings) for _ in range(rounds)]
    for r in range(rounds):
        order = range(len(settings)) if r % 2 == 0 else reversed(range(len(settings)))
        for i in order:
            out[r][i] = one(settings[i], counts[i], f"round {r + 1}/{rounds}")
    return [[m for m in r if m is not None] for r in out]


def typical(rounds: list[list[LoaderSetting]]) -> list[LoaderSetting]:
    """Per setting, the round whose D is the median (the lower of the two middle ones for an
    even count): a whole record, its CPU, memory and stage timing read with that D."""
    table = []
    for readings in zip(*rounds, strict=True):
        ordered = sorted(readings, key=lambda s: s.loader_time.value)
        table.append(ordered[(len(ordered) - 1) // 2])
    return table


def scaled(s: LoaderSetting, factor: float) -> LoaderSetting:
    """The reading with every time the loader model reads (D and its interval, the CPU and
    wall time, Grain's stage timing) multiplied by ``factor``: the same work on a machine
    ``factor`` times slower. The batch times' samples, first batch and rates are left as
    read."""
    d = s.loader_time
    r = s.resources
    if r is not None:
        r = dataclasses.replace(r, wall_s=r.wall_s * factor, main_cpu_s=r.main_cpu_s * factor,
                                worker_cpu_s=r.worker_cpu_s * factor,
                                main_wait_s=r.main_wait_s * factor,
                                worker_wait_s=r.worker_wait_s * factor)
    return dataclasses.replace(
        s, loader_time=dataclasses.replace(d, value=d.value * factor, low=d.low * factor,
                                           high=d.high * factor),
        resources=r, stages=tuple(dataclasses.replace(st, avg_s=st.avg_s * factor,
                                                      total_s=st.total_s * factor)
                                  for st in s.stages))


def round_factors(rounds: list[list[LoaderSetting]]) -> list[float]:
    """How much slower the machine ran each round than its typical round: the median, over
    the settings, of a setting's D in that round over its median D (in logs; one round of a
    median polish). A slow spell that spans a whole round moves every setting in it alike;
    this is that common move."""
    logs = [[math.log(s.loader_time.value) for s in r] for r in rounds]
    middle = [statistics.median(column) for column in zip(*logs, strict=True)]
    return [math.exp(statistics.median(v - m for v, m in zip(r, middle, strict=True)))
            for r in logs]


def round_adjusted(rounds: list[list[LoaderSetting]], factors: list[float]
                   ) -> list[list[LoaderSetting]]:
    """The rounds with each one's common slow-down (``factors``, from ``round_factors``)
    divided out: each setting as on the machine's typical round, so that a slow spell during
    one setting's middle rounds does not become a difference between settings. The model
    sees, and is scored against, each setting's median round of these (``typical``)."""
    return [[scaled(s, 1.0 / f) for s in r] for r, f in zip(rounds, factors, strict=True)]


def spread(readings: tuple[LoaderSetting, ...]) -> float:
    """Half the range of a setting's D over the rounds, relative to its median: how far the
    machine moves one reading of the same setting."""
    d = sorted(s.loader_time.value for s in readings)
    return (d[-1] - d[0]) / 2 / statistics.median(d)


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


def errors_of(table: list[LoaderSetting], cores: int
              ) -> tuple[list[LoaderSetting], list[tuple[LoaderSetting, float, str]] | str,
                         list[float], list[float], int]:
    """The ``first`` split's seen settings and predictions (or why refused), its errors, and
    the leave-one-out errors with the count refused."""
    key = {(s.workers, s.threads): s for s in table}
    seen = [key[k] for k in FIRST if k in key]
    first = predict(seen, [s for s in table if s not in seen], cores)
    first_errors = [] if isinstance(first, str) else [error(s, p) for s, p, _ in first]
    loo_errors, refused = [], 0
    for s in table:
        out = predict([t for t in table if t is not s], [s], cores)
        if isinstance(out, str):
            refused += 1
        else:
            loo_errors.append(error(s, out[0][1]))
    return seen, first, first_errors, loo_errors, refused


def report(name: str, rounds: list[list[LoaderSetting]], cores: int) -> dict:
    factors = round_factors(rounds)
    adjusted = round_adjusted(rounds, factors)
    table = typical(adjusted)
    spreads = {id(t): spread(r) for t, r in zip(table, zip(*adjusted, strict=True),
                                                strict=True)}
    seen, first, first_errors, loo_errors, refused = errors_of(table, cores)
    print(f"\n{name}: model fitted to {', '.join(s.settings.short_label() for s in seen)}")
    if isinstance(first, str):
        print(f"  no prediction: {first}")
    else:
        print(f"  {'setting':<28} {'measured ms':>12} {'rounds +-':>10} {'predicted ms':>13} "
              f"{'error':>7}  binds")
        for (s, p, binding), e in zip(first, first_errors, strict=True):
            print(f"  {s.settings.short_label():<28} {s.loader_time.value * 1e3:>12.2f} "
                  f"{100 * spreads[id(s)]:>9.1f}% {p * 1e3:>13.2f} {100 * e:>6.1f}%  {binding}")
    print(f"  first:  {summary(first_errors)}")
    print(f"  loo:    {summary(loo_errors)}" + (f"; refused {refused}" if refused else ""))
    if len(rounds) > 1:
        raw = [spread(r) for r in zip(*rounds, strict=True)]
        print("  each round's common slow-down, divided out: "
              + ", ".join(f"{100 * (f - 1):+.1f}%" for f in factors))
        print(f"  the same setting over {len(rounds)} rounds: +-"
              f"{100 * statistics.median(spreads.values()):.1f}% in the median, +-"
              f"{100 * max(spreads.values()):.1f}% at most (as read: +-"
              f"{100 * statistics.median(raw):.1f}%, +-{100 * max(raw):.1f}%)")
        _, _, f0, l0, n0 = errors_of(typical(rounds), cores)
        print(f"  median rounds as read: first {summary(f0)}; loo {summary(l0)}"
              + (f"; refused {n0}" if n0 else ""))
        for r, one in enumerate(rounds):
            _, _, f1, l1, n1 = errors_of(one, cores)
            print(f"  round {r + 1} alone: first {summary(f1)}; loo {summary(l1)}"
                  + (f"; refused {n1}" if n1 else ""))
    return {"first": first_errors, "loo": loo_errors}


def main() -> None:
    args = grid_arguments(__doc__, batches=30, names=list(PIPELINES), rounds=5, seconds=2.0)
    ensure_absl_flags_parsed()
    cores = usable_cores()
    names = [args.only] if args.only else list(PIPELINES)
    tables = Tables(args)
    measured = f"tables replayed from {args.replay}" if args.replay else (
        f"{args.batches}+ batches and {args.seconds:g}+ s per setting; {args.rounds} rounds")
    print(f"grid: workers 0..{args.max_workers} x threads {THREADS}; {cores} cores; "
          f"{measured}; each round's common slow-down divided out, then each setting's "
          "median round kept")
    results = {}
    for name in names:
        workload, keys = PIPELINES[name]

        def measure(name=name, workload=workload, keys=keys) -> list[list[LoaderSetting]]:
            print(f"{name}: {workload} {keys}", file=sys.stderr)
            return measure_rounds(pipeline(workload, keys), grid(args.max_workers),
                                  args.batches, args.rounds, args.seconds)

        rounds = tables.rounds(name, measure)
        results[name] = report(f"{name} ({workload} {keys})", rounds, cores)
    every = [e for r in results.values() for e in r["first"]]
    every_loo = [e for r in results.values() for e in r["loo"]]
    print(f"\nall pipelines, first: {summary(every)}; loo: {summary(every_loo)}")


if __name__ == "__main__":
    main()
