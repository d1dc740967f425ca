"""The joint search over Grain's four knobs vs the exhaustive grid vs pick_performance_config.

For each calibrated pipeline (latency-bound, CPU-bound, main-process-bound) the whole grid
(workers x read threads x per-worker buffer x read prefetch) is measured once with real
Grain workers (pipecheck's ``measure_setting``, no device_put). Then, on that measured
table:

- grid:     the exhaustive choice, by the tuner's own rule (``tuner.choose``: the cheapest
            setting with D <= 90% of T, else the cheapest within 10% of the fastest);
- adaptive: ``tuner.tune_grain``, replayed on the table (each setting it asks for is looked
            up, so it sees exactly the numbers the grid saw: the comparison is of the
            search, not of re-measurement noise); a setting it asks for again (a reading
            that disagreed with the others) is measured again for real, and counts as a
            trial;
- no-again: the same search with ``remeasure=False`` (every reading from the table);
- grain:    ``grain.experimental.pick_performance_config`` (element size and a RAM budget
            only); its setting is looked up in the table, or measured when not in it.

It prints, per pipeline and method, the trials, the chosen setting, its D (the grid's
reading), whether it meets the goal, and its D relative to the grid's choice and to the grid's
fastest setting; then the grid's and the searches' choices measured again side by side
(``--check-rounds`` rounds, order rotated: a bad reading in the grid itself shows there).
The measured tables are written to --tables (JSON) and can be replayed with --replay.

    PYTHONPATH=. python benchmarks/tuner_joint_search.py [--max-workers 4] [--batches 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

from pipecheck.analysis.loader.tuner import Trial, choose, tune_grain
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.data.grain_pipeline import IN_PROCESS, build_iter_dataset, ensure_absl_flags_parsed
from pipecheck.errors import PipecheckError
from pipecheck.host_cpus import usable_cores
from pipecheck.measure.dataloader import measure_setting
from pipecheck.measure.loader_search import batches_for, loader_trial
from pipecheck.measure.resources import default_ram_budget_mb
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.workloads import resolve
from pipecheck.workloads.calibrated import make_dataset

THREADS = (1, 4, 16)
BUFFERS = (1, 2)
PREFETCH_FACTORS = (1, 2)

PIPELINES = {
    # name: (calibrated keys, target step time in ms)
    "latency-bound": ({"load_ms": 40.0}, 10.0),
    "cpu-bound": ({"cpu_ms": 12.0}, 5.0),
    "main-process-bound": ({"load_ms": 20.0, "consumer_ms": 8.0}, 5.0),
}


def grid(max_workers: int) -> list[GrainSettings]:
    out: list[GrainSettings] = []
    for w in range(max_workers + 1):
        for t in THREADS:
            for b in BUFFERS:
                for f in PREFETCH_FACTORS:
                    s = GrainSettings(w, b if w else 2, t, max(1, f * t))
                    if s not in out:
                        out.append(s)
    return out


def measure_table(keys: dict, settings: list[GrainSettings], batches: int) -> list[Trial]:
    cfg = resolve({"workload": "calibrated", **keys})
    ds = make_dataset(cfg)
    table = []
    for i, s in enumerate(settings):
        t0 = time.perf_counter()
        for attempt in (1, 2):  # a shared machine: another program may disturb one run
            try:
                m = measure_setting(ds, s,
                                    batches_for(s.workers, batches, s.per_worker_buffer,
                                                s.prefetch),
                                    put=None, tokens_key=None, stage_wait_s=0.0)
                break
            except PipecheckError as e:
                if attempt == 2:
                    raise
                print(f"  {s.label()}: {e}; measuring it again", file=sys.stderr)
        table.append(loader_trial(m))
        print(f"  [{i + 1}/{len(settings)}] {s.label()}: D = {table[-1].batch_s * 1e3:.2f} ms "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return table


def grain_pick(keys: dict, max_workers: int) -> GrainSettings:
    import grain

    cfg = resolve({"workload": "calibrated", **keys})
    perf = grain.experimental.pick_performance_config(
        build_iter_dataset(make_dataset(cfg), IN_PROCESS),
        ram_budget_mb=int(default_ram_budget_mb()),
        max_workers=max_workers, max_buffer_size=None)
    mp, read = perf.multiprocessing_options, perf.read_options
    return GrainSettings(int(mp.num_workers), int(mp.per_worker_buffer_size),
                         int(read.num_threads), int(read.prefetch_buffer_size))


def stored_trial(t: dict) -> Trial:
    """A Trial of a --tables file: its settings nested, or flat (files of older runs)."""
    t = dict(t)
    knobs = t.pop("settings", None) or {k: t.pop(k) for k in
                                        ("workers", "per_worker_buffer", "threads", "prefetch")}
    return Trial(GrainSettings(**knobs), **t)


def _replay(table: dict[GrainSettings, Trial], asked: list[GrainSettings], keys: dict,
            batches: int):
    """The tuner's measure function: a setting's first reading from the measured table, a
    reading asked for again measured now."""
    def measure(s: GrainSettings) -> Trial:
        again = s in asked
        asked.append(s)
        if not again:
            return table[s]
        (t,) = measure_table(keys, [s], batches)
        return t
    return measure


def _side_by_side(keys: dict, settings: list[GrainSettings], rounds: int,
                  batches: int) -> dict[GrainSettings, float]:
    """Median D of each setting over ``rounds`` rounds, the order rotated each round."""
    readings: dict[GrainSettings, list[float]] = {s: [] for s in settings}
    for r in range(rounds):
        order = settings[r % len(settings):] + settings[:r % len(settings)]
        for s, t in zip(order, measure_table(keys, order, batches), strict=True):
            readings[s].append(t.batch_s)
    return {s: statistics.median(v) for s, v in readings.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-workers", type=int, default=4)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--tables", default="tuner_joint_search_tables.json",
                    help="write the measured tables here")
    ap.add_argument("--replay", help="replay tables written by an earlier run (no measuring)")
    ap.add_argument("--only", help="one pipeline name")
    ap.add_argument("--check-rounds", type=int, default=3,
                    help="measure the grid's and the searches' choices again side by side, "
                         "this many rounds (0: not)")
    args = ap.parse_args()
    ensure_absl_flags_parsed()
    cores = usable_cores()
    settings = grid(args.max_workers)
    stored = json.load(open(args.replay)) if args.replay else {}
    tables: dict[str, list[dict]] = {}
    print(f"grid: workers 0..{args.max_workers} x threads {THREADS} x per-worker buffer "
          f"{BUFFERS} x prefetch {PREFETCH_FACTORS} (x threads) = {len(settings)} settings; "
          f"{cores} cores; {args.batches}+ batches per setting")
    for name, (keys, target_ms) in PIPELINES.items():
        if (args.only and name != args.only) or (args.replay and name not in stored):
            continue  # replaying measures nothing: only the pipelines the file holds
        target = target_ms / 1000.0
        if name in stored:
            table = [stored_trial(t) for t in stored[name]["table"]]
            picked = GrainSettings(**stored[name]["grain"])
        else:
            print(f"measuring {name} ...", file=sys.stderr)
            table = measure_table(keys, settings, args.batches)
            picked = grain_pick(keys, args.max_workers)
        by_settings = {t.settings: t for t in table}
        if picked not in by_settings:  # Grain's pick is off the grid: measure it too
            (extra,) = measure_table(keys, [picked], args.batches)
            table.append(extra)
            by_settings[picked] = extra
        tables[name] = {"keys": keys, "target_ms": target_ms,
                        "table": [dataclasses.asdict(t) for t in table],
                        "grain": dataclasses.asdict(picked)}
        if not args.replay:  # written after each pipeline: a later failure loses nothing
            with open(args.tables, "w") as f:
                json.dump(tables, f, indent=1)
        grid_trials = [by_settings[s] for s in settings]
        grid_choice, grid_ok = choose(grid_trials, target)
        fastest = min(t.batch_s for t in grid_trials)
        asked: list[GrainSettings] = []
        adaptive = tune_grain(_replay(by_settings, asked, keys, args.batches), target,
                              max_workers=args.max_workers, cores=cores, thread_ladder=THREADS,
                              buffer_ladder=BUFFERS, prefetch_factors=PREFETCH_FACTORS)
        goal = target * LOADER_HEADROOM
        print(f"\n{name}: {keys}, target T = {target_ms:g} ms (goal D <= {goal * 1e3:.1f} ms); "
              f"fastest on the grid: {fastest * 1e3:.2f} ms")
        print(f"{'method':<10}{'trials':>7}  {'setting':<44}{'D ms':>8}{'goal':>6}"
              f"{'vs grid choice':>16}{'vs fastest':>12}")
        plain_asked: list[GrainSettings] = []
        plain = tune_grain(_replay(by_settings, plain_asked, keys, args.batches), target,
                           max_workers=args.max_workers, cores=cores, thread_ladder=THREADS,
                           buffer_ladder=BUFFERS, prefetch_factors=PREFETCH_FACTORS,
                           remeasure=False)
        # each choice at the grid's reading of its setting: the same numbers for all
        rows = [("grid", len(grid_trials), grid_choice),
                ("adaptive", len(asked), by_settings[adaptive.chosen.settings]),
                ("no-again", len(plain_asked), by_settings[plain.chosen.settings]),
                ("grain", 0, by_settings[picked])]
        for method, n, t in rows:
            print(f"{method:<10}{n:>7}  {t.settings.label():<44}{t.batch_s * 1e3:>8.2f}"
                  f"{'yes' if t.batch_s <= goal else 'no':>6}"
                  f"{t.batch_s / grid_choice.batch_s:>16.3f}{t.batch_s / fastest:>12.3f}")
        print(f"adaptive: {len(asked)}/{len(grid_trials)} = "
              f"{len(asked) / len(grid_trials):.2f} of the grid's trials; "
              f"same setting as the grid: {adaptive.chosen.settings == grid_choice.settings}; "
              f"{adaptive.reason}")
        if args.check_rounds:
            chosen = {"grid": grid_choice.settings, "adaptive": adaptive.chosen.settings,
                      "no-again": plain.chosen.settings}
            again = _side_by_side(keys, list(dict.fromkeys(chosen.values())),
                                  args.check_rounds, args.batches)
            print(f"the choices measured again side by side ({args.check_rounds} rounds, order "
                  "rotated, median D): " + "; ".join(
                      f"{m} {again[c] * 1e3:.2f} ms ({again[c] / again[chosen['grid']]:.3f} "
                      "of the grid's choice)" for m, c in chosen.items()))
    if not args.replay:
        with open(args.tables, "w") as f:
            json.dump(tables, f, indent=1)
        print(f"\nwrote the measured tables to {os.path.abspath(args.tables)}")


if __name__ == "__main__":
    main()
