"""``pipecheck profile`` on captures of 100, 300 and 1,000 steps: time and peak memory
against capture size, and XProf's own conversion of the same file where ``xprof`` is
installed.

    PYTHONPATH=. nice python benchmarks/profile_scale.py [--sizes 100,300,1000]

Each capture is made live with the real ``jax.profiler`` (tests/data/profile_loop.py: a
generator of 1 ms a batch, ~1 ms of compute, StepTraceAnnotation markers, the Python
tracer on, as ``start_trace`` captures by default). Each reading runs in its own process,
which reports the wall and CPU time of the reading alone (JAX's import excluded) and the
process's peak RSS (and its growth over the RSS after importing JAX and pipecheck):
``pipecheck profile`` (read with ProfileData, analyzed, the record
built) and, where ``xprof`` imports, XProf's ``input_pipeline_analyzer`` on a copy of the
same file. It prints a table and the growth of pipecheck's CPU time per step from the
smallest to the largest capture (linear cost: a ratio near 1).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
LOOP = REPO / "tests" / "data" / "profile_loop.py"

READ_PIPECHECK = """
import json, resource, sys, time
import jax  # imported before the clock starts
from pipecheck.profiling import ProfileOptions, profile_capture
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
w0, c0 = time.perf_counter(), time.process_time()
r = profile_capture(ProfileOptions(sys.argv[1]))
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "steps": len(r.steps), "verdict": r.verdict,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "base_mb": base}))
"""

READ_XPROF = """
import json, os, resource, shutil, sys, tempfile, time
from xprof.convert import raw_to_tool_data
tmp = tempfile.mkdtemp()
copy = os.path.join(tmp, os.path.basename(sys.argv[1]))
shutil.copyfile(sys.argv[1], copy)
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
w0, c0 = time.perf_counter(), time.process_time()
raw_to_tool_data.xspace_to_tool_data([copy], "input_pipeline_analyzer", {})
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
shutil.rmtree(tmp)
print(json.dumps({"wall": wall, "cpu": cpu,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_capture(tmp: pathlib.Path, steps: int) -> pathlib.Path:
    out = tmp / f"c{steps}"
    subprocess.run([sys.executable, str(LOOP), str(out), "--steps", str(steps),
                    "--load-ms", "1", "--compute-ms", "1"], check=True,
                   capture_output=True)
    (pb,) = out.glob("plugins/profile/*/*.xplane.pb")
    return pb


def run(code: str, pb: pathlib.Path) -> dict | None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    r = subprocess.run([sys.executable, "-c", code, str(pb)], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def xprof_available() -> bool:
    return subprocess.run([sys.executable, "-c", "import xprof.convert.raw_to_tool_data"],
                          capture_output=True).returncode == 0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="100,300,1000")
    sizes = [int(s) for s in p.parse_args().sizes.split(",")]
    xprof = xprof_available()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            pb = make_capture(pathlib.Path(tmp), n)
            ours = run(READ_PIPECHECK, pb)
            theirs = run(READ_XPROF, pb) if xprof else None
            rows.append((n, pb.stat().st_size, ours, theirs))
    print(f"{'steps':>6} {'capture':>9} {'pipecheck wall':>14} {'cpu':>7} {'cpu/step':>9} "
          f"{'peak RSS':>9} {'growth':>7} {'verdict':>14} | {'XProf wall':>10} {'cpu':>7} "
          f"{'peak RSS':>9}")
    for n, size, ours, theirs in rows:
        assert ours is not None, f"pipecheck profile failed on the {n}-step capture"
        x = (f"{theirs['wall']:>9.2f}s {theirs['cpu']:>6.2f}s {theirs['rss_mb']:>7.0f}MB"
             if theirs else f"{'-':>10} {'-':>7} {'-':>9}")
        print(f"{n:>6} {size / 2**20:>7.1f}MB {ours['wall']:>13.2f}s {ours['cpu']:>6.2f}s "
              f"{1e3 * ours['cpu'] / n:>7.2f}ms {ours['rss_mb']:>7.0f}MB "
              f"{ours['rss_mb'] - ours['base_mb']:>5.0f}MB {ours['verdict']:>14} | {x}")
    (n0, _, a, _), (n1, _, b, _) = rows[0], rows[-1]
    print(f"pipecheck CPU time per step, {n1} vs {n0} steps: "
          f"{(b['cpu'] / n1) / (a['cpu'] / n0):.2f}x (1.00 = linear)")
    if not xprof:
        print("XProf columns empty: xprof is not installed (pip install 'pipecheck[xprof]')")


if __name__ == "__main__":
    main()
