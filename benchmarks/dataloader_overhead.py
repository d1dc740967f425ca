"""The same Grain pipeline measured three ways, alternating, in one run.

1. bare:      ``for batch in iterator`` after the first batch, timed as a whole;
2. tfds:      tfds.benchmark's measurement (``raw_benchmark``; ``tfds.benchmark`` itself
              only adds pandas tables on top) and its examples/sec "without the first";
3. pipecheck: ``pipecheck.measure.dataloader.measure_setting`` (per-batch clock reads, stall timer,
              Grain stage timing on), exactly what ``pipecheck dataloader`` runs.

Every method opens a fresh iterator of the same pipeline (same workers and threads, no
device_put) and leaves out the first batch. Rounds rotate the order of the methods; the
medians over rounds and their ratios to the bare loop are printed.

    PYTHONPATH=. python benchmarks/dataloader_overhead.py --workers 1 --batches 200 --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from typing import Any, Callable

from pipecheck.records.grain_settings import GrainSettings


def bare_loop(dataset: Any, workers: int, threads: int, batches: int, batch_size: int) -> float:
    from pipecheck.data.grain_pipeline import build_iter_dataset

    it = iter(build_iter_dataset(dataset, GrainSettings(workers, threads=threads)))
    try:
        next(it)  # the first batch (worker start-up) is left out, as in the other two
        t0 = time.perf_counter()
        n = 0
        for _batch in it:
            n += 1
            if n == batches:
                break
        elapsed = time.perf_counter() - t0
    finally:
        it.close()
    return batches * batch_size / elapsed


def tfds_benchmark(dataset: Any, workers: int, threads: int, batches: int,
                   batch_size: int) -> tuple[float, float]:
    """tfds's figure (examples/s without the first) and the same run counted correctly."""
    from tensorflow_datasets.core.utils.benchmark import raw_benchmark

    from pipecheck.data.grain_pipeline import build_iter_dataset

    it = iter(build_iter_dataset(dataset, GrainSettings(workers, threads=threads)))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            raw = raw_benchmark(it, num_iter=batches + 1, batch_size=batch_size)
    finally:
        it.close()
    corrected = batches * batch_size / raw.total_time_s(include_first=False)
    return raw.examples_per_second(include_first=False), corrected


def pipecheck_setting(dataset: Any, workers: int, threads: int, batches: int,
                      tokens_key: str | None) -> float:
    from pipecheck.measure.dataloader import measure_setting

    result = measure_setting(dataset, GrainSettings(workers, threads=threads), batches, put=None,
                             tokens_key=tokens_key, timeout_s=120.0)
    return result.examples_per_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="demo", choices=("demo", "calibrated"))
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="config override, e.g. --set load_ms=20")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    from pipecheck.data.grain_pipeline import ensure_absl_flags_parsed
    from pipecheck.measure.dataloader import loader_parts
    from pipecheck.workloads import resolve

    ensure_absl_flags_parsed()
    cfg = resolve(None, [f"workload={args.workload}", *args.overrides])
    parts = loader_parts(cfg)
    batch_size = cfg["batch_size"]
    w, t, n = args.workers, args.threads, args.batches

    methods: dict[str, Callable[[], Any]] = {
        "bare": lambda: bare_loop(parts.dataset, w, t, n, batch_size),
        "tfds": lambda: tfds_benchmark(parts.dataset, w, t, n, batch_size),
        "pipecheck": lambda: pipecheck_setting(parts.dataset, w, t, n, parts.tokens_key),
    }
    names = list(methods)
    got: dict[str, list[float]] = {"bare": [], "tfds": [], "tfds_corrected": [], "pipecheck": []}
    for r in range(args.rounds):
        order = names[r % 3:] + names[: r % 3]
        for name in order:
            value = methods[name]()
            if name == "tfds":
                got["tfds"].append(value[0])
                got["tfds_corrected"].append(value[1])
            else:
                got[name].append(value)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{k} {v[-1]:.1f}" for k, v in got.items()), file=sys.stderr)

    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"pipeline: workload {args.workload} {' '.join(args.overrides)}, workers={w}, "
          f"threads={t}, batch_size={batch_size}, {n} batches after the first, "
          f"{args.rounds} rounds (order rotated), no device_put")
    print(f"{'method':<34}{'examples/s (median)':>20}{'ratio to bare':>15}  all rounds")
    labels = {
        "bare": "bare for-loop",
        "pipecheck": "pipecheck dataloader",
        "tfds": "tfds.benchmark (its figure)",
        "tfds_corrected": "tfds.benchmark, counted correctly",
    }
    for key in ("bare", "pipecheck", "tfds", "tfds_corrected"):
        rounds = " ".join(f"{v:.0f}" for v in got[key])
        print(f"{labels[key]:<34}{med[key]:>20.1f}{med[key] / med['bare']:>15.4f}  {rounds}")
    print(f"expected tfds over-count from its first-batch accounting: "
          f"x{((n + 1) * batch_size - 1) / (n * batch_size):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
