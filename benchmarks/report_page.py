"""The HTML page of a million-step run: time to write it, its size, time to open it.

    PYTHONPATH=. nice python benchmarks/report_page.py [--steps 1000000] [--no-browser]

Two records of ``--steps`` steps, made in a temporary directory and removed afterwards:

- ``imported``: ``pipecheck import`` of a MaxText log in the real line format
  (``tests/maxtext_log.py``: a checkpoint every 1000 steps stalling the next step);
- ``monitor``: a Monitor record whose steps have spans (``tests/page_records.long_steps``,
  a checkpoint tag every 1000 steps), saved with the record store.

For each, in one run, side by side: the wall and CPU time of ``pipecheck report R.json -o
R.html`` and of ``pipecheck plot R.json -o R.png`` (the PNG ``plot`` draws of the same
record: the ratio report/plot says how writing the page compares with the existing
picture), each command in its own process, start-up excluded; the page's size; and the
time headless Chromium takes to load the page, run its script and dump the DOM, against
the same for the page of a 60-step record (the ratio says what the million steps cost the
browser).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def _child(argv: list[str]) -> None:
    from pipecheck.cli import main

    t0, c0 = time.perf_counter(), time.process_time()
    code = main(argv)
    print(json.dumps({"code": code, "wall": time.perf_counter() - t0,
                      "cpu": time.process_time() - c0}))


def timed(*argv: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True,
                          text=True, env=env, check=False)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["code"] != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr[-500:]}")
    return out


def browser_s(page: pathlib.Path) -> float:
    """Seconds for headless Chromium to load the page, run its script and dump the DOM."""
    t0 = time.perf_counter()
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                    f"file://{page}"], capture_output=True, check=True, timeout=300)
    return time.perf_counter() - t0


def make_records(tmp: pathlib.Path, steps: int) -> dict[str, pathlib.Path]:
    sys.path.insert(0, str(REPO))
    from pipecheck.records import store
    from pipecheck.records.common import Distribution
    from tests import page_records
    from tests.maxtext_log import write_log

    write_log(tmp / "a.log", steps, seed=1, step_s=0.512)
    timed("import", str(tmp / "a.log"), "--json", str(tmp / "imported.json"))
    long = page_records.long_steps(steps)
    record = dataclasses.replace(page_records.monitor_record(), steps=long, total_steps=steps,
                                 step_time=Distribution.of(long.column("time_s")))
    store.save(record, tmp / "monitor.json")
    store.save(page_records.monitor_record(), tmp / "small.json")
    return {"imported": tmp / "imported.json", "monitor": tmp / "monitor.json"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        records = make_records(tmp, args.steps)
        print(f"{args.steps:,} steps per record")
        print(f"{'record':<10} {'report wall':>12} {'report CPU':>11} {'plot wall':>10} "
              f"{'report/plot':>12} {'page size':>10} {'record size':>12}")
        for kind, path in records.items():
            page, png = tmp / f"{kind}.html", tmp / f"{kind}.png"
            rep = timed("report", str(path), "-o", str(page))
            plot = timed("plot", str(path), "-o", str(png))
            print(f"{kind:<10} {rep['wall']:>10.2f} s {rep['cpu']:>9.2f} s "
                  f"{plot['wall']:>8.2f} s {rep['wall'] / plot['wall']:>12.2f} "
                  f"{page.stat().st_size / 1e6:>7.2f} MB {path.stat().st_size / 1e6:>9.2f} MB")
        if not args.no_browser:
            small = tmp / "small.html"
            timed("report", str(tmp / "small.json"), "-o", str(small))
            base = browser_s(small)
            print(f"\nChromium: load, script and DOM dump of a 60-step page: {base:.2f} s")
            for kind in records:
                t = browser_s(tmp / f"{kind}.html")
                print(f"  {kind}: {t:.2f} s ({t / base:.2f}x the 60-step page)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
