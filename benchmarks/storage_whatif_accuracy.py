"""How well the storage what-if (``pipecheck whatif RUN.json --read-latency L``) predicts the
loader time D at read latencies the model did not see, on a real slow FUSE mount.

An ArrayRecord file (2,000 records of 2 kB, ``group_size:1``: one read per record) is served
through ``pipecheck.testing.slow_mount`` at a base latency per read; ``pipecheck dataloader``
(a subprocess, the real command) measures ``pipecheck/testing/storage_pipeline.py``
(``ArrayRecordDataSource`` -> shuffle -> decode map -> batch of 8) over a grid of workers x
read threads and writes its record. The same grid is then measured on mounts at the unseen
latencies, and each setting's D there is predicted from the base record alone, as
``pipecheck whatif --workers W --threads T --read-latency (L - base)`` predicts it.
Printed: predicted vs measured per setting and latency, |predicted - measured| / measured,
its median and largest, against the goal (median <= 10%, none over 25%).

    PYTHONPATH=. python benchmarks/storage_whatif_accuracy.py [--base-ms 5]
        [--unseen-ms 15,40] [--workers 0,1,2] [--threads 1,4] [--batches 80]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from pipecheck.analysis.loader.whatif import Asked, what_if
from pipecheck.records import store
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.testing.slow_mount import SlowStorage, mounted
from pipecheck.testing.storage_pipeline import (
    RECORD_BYTES,
    RECORDS,
    config_text,
    write_array_record,
)

BATCH_SIZE = 8
GOAL_MEDIAN = 0.10
GOAL_MAX = 0.25


def measure(src: pathlib.Path, work: pathlib.Path, latency_s: float,
            args: argparse.Namespace) -> DataloaderResult:
    """``pipecheck dataloader`` over the grid, the file served at ``latency_s`` a read."""
    name = f"{latency_s * 1e3:g}ms"
    mountpoint = work / f"mnt-{name}"
    mountpoint.mkdir()
    out = work / f"dataloader-{name}.json"
    with mounted(src, mountpoint, SlowStorage(latency_s)) as mount:
        cfg = work / f"cfg-{name}.yml"
        cfg.write_text(config_text(mountpoint / "data.array_record", BATCH_SIZE,
                                   args.decode_us))
        cmd = [sys.executable, "-m", "pipecheck", "dataloader", "--config", str(cfg),
               "--workers", args.workers, "--threads", args.threads, "--batches",
               str(args.batches), "--no-device-put", "--json", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"pipecheck dataloader failed at {name}:\n{proc.stderr[-2000:]}")
        reads = mount.reads
    record = store.load(str(out))
    assert isinstance(record, DataloaderResult)
    examples = sum(s.examples_per_batch * (s.batch_time.summary.n + 1) for s in record.results)
    print(f"measured at {name}: {reads} reads served for about {examples} examples timed "
          f"(the rest: workers' and threads' read-ahead)", file=sys.stderr)
    return record


def compare(base: DataloaderResult, base_s: float, at: DataloaderResult, latency_s: float
            ) -> list[float]:
    """Each setting measured at ``latency_s`` against its prediction from ``base``."""
    errors = []
    for s in at.results:
        g = s.settings
        asked = Asked(workers=g.workers, per_worker_buffer=g.per_worker_buffer,
                      threads=g.threads, prefetch=g.prefetch,
                      read_latency_s=latency_s - base_s)
        p = what_if(base, "base", asked)
        measured = s.loader_time.value
        e = abs(p.predicted_loader_s.value - measured) / measured
        errors.append(e)
        print(f"  {latency_s * 1e3:>6g} ms  {g.short_label():<26} {measured * 1e3:>11.1f} "
              f"{p.predicted_loader_s.value * 1e3:>12.1f} {100 * e:>7.1f}%  {p.loader_binding}")
    return errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-ms", type=float, default=5.0)
    ap.add_argument("--unseen-ms", default="15,40")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--batches", type=int, default=80)
    ap.add_argument("--decode-us", type=int, default=100)
    args = ap.parse_args()
    unseen = [float(v) * 1e-3 for v in args.unseen_ms.split(",")]
    base_s = args.base_ms * 1e-3
    print(f"ArrayRecord {RECORDS} x {RECORD_BYTES} B on a slow FUSE mount; batch of "
          f"{BATCH_SIZE}, {args.decode_us} us decode per record; workers {args.workers} x "
          f"threads {args.threads}; {args.batches} batches per setting; {os.cpu_count()} "
          f"cores; model fitted at {args.base_ms:g} ms per read")
    with contextlib.ExitStack() as stack:
        work = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory()))
        src = work / "src"
        src.mkdir()
        write_array_record(src / "data.array_record")
        base = measure(src, work, base_s, args)
        fit = what_if(base, "base", Asked()).model
        ds = ", ".join(f"{s.settings.short_label()} {s.loader_time.value * 1e3:.1f} ms"
                       for s in base.results)
        print(f"base record: D {ds}; the model: {fit.latency_s * 1e3:.1f} ms waiting + "
              f"{fit.worker_cpu_s * 1e3:.1f} ms CPU per batch (fit error "
              f"{100 * fit.fit_error:.0f}%)")
        print(f"  {'latency':>9}  {'setting':<26} {'measured ms':>11} {'predicted ms':>12} "
              f"{'error':>8}  binds")
        errors = [e for lat in unseen for e in compare(base, base_s,
                                                       measure(src, work, lat, args), lat)]
    med, top = statistics.median(errors), max(errors)
    ok = med <= GOAL_MEDIAN and top <= GOAL_MAX
    print(f"error over {len(errors)} predictions: median {100 * med:.1f}%, largest "
          f"{100 * top:.1f}% (goal: median <= {100 * GOAL_MEDIAN:.0f}%, none over "
          f"{100 * GOAL_MAX:.0f}%): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
