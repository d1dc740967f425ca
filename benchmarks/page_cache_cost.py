"""What reading the page cache costs pipecheck, beside reading the data: one file of
``--mb`` MB on a local disk, in rounds, each timing side by side

1. read:      the whole file read from the page cache (warm), as a pipeline's pass would;
2. residency: ``page_cache.residency`` of the warm file (mincore on a mapping), what every
              setting reads twice, outside its timed window;
3. evict:     ``page_cache.evict`` (fdatasync, posix_fadvise DONTNEED, residency again), what
              ``--cold`` does before each setting.

Prints the medians over rounds, the cost per GB, and residency's and eviction's ratio to
the warm read.

    PYTHONPATH=. python benchmarks/page_cache_cost.py --mb 512 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Callable

from pipecheck.measure import page_cache as pc


def timed(f: Callable[[], object]) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to write the file (a local disk)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        path = os.path.join(d, "data.bin")
        with open(path, "wb") as f:
            for _ in range(args.mb):
                f.write(os.urandom(1 << 20))
        files = pc.DataFiles((path,), 1)
        times: dict[str, list[float]] = {"read": [], "residency": [], "evict": []}
        for _ in range(args.rounds):
            with open(path, "rb") as f:
                f.read()  # warm
            times["read"].append(timed(lambda: open(path, "rb").read()))
            times["residency"].append(timed(lambda: pc.residency(files.paths)))
            times["evict"].append(timed(lambda: pc.evict(files)))
    gb = args.mb / 1024
    read = statistics.median(times["read"])
    print(f"{args.mb} MB file, {args.rounds} rounds (medians):")
    for name, values in times.items():
        m = statistics.median(values)
        print(f"  {name:9s} {1e3 * m:8.1f} ms  {1e3 * m / gb:8.1f} ms/GB  "
              f"{m / read:6.2f}x the warm read")


if __name__ == "__main__":
    main()
