"""Make the committed jax.profiler captures of tests/data/captures/ (CPU, this machine's JAX).

usage: python tests/data/make_profile_captures.py [NAME ...]   (default: all)

Each capture is ``profile_loop.py`` run as a user would run it, with a real
``jax.profiler.start_trace``; the ``.xplane.pb`` is kept (the trace JSON beside it only
for ``forced_sync``, to test reading it). The numbers are chosen so each verdict holds with
a wide margin on a busy 2-core machine:

- ``input_bound``: a generator sleeping 40 ms per batch, ~5 ms of compute, no sync;
- ``forced_sync``: a generator of 30 ms, ~30 ms of compute, ``float(loss)`` every step in
  ``log_loss`` (the line marked FORCED-SYNC): a step twice its slower part;
- ``compute_bound``: a generator of 2 ms, ~40 ms of compute, the same sync;
- ``host_bound``: 50 tiny jitted calls a step, no loading;
- ``no_markers``: ``input_bound`` without StepTraceAnnotation (``train_step`` is picked as
  the step);
- ``block_no_markers``: one jitted function called 10 times, loading 30 ms before each call,
  ~30 ms of compute and ``jax.block_until_ready`` after each (``wait_for_step``), no markers:
  forced-sync, ``train_step`` picked as the step;
- ``small_fns_no_markers``: three small jitted functions of the same cost, 100 calls in
  turn per iteration, 4 iterations, no markers: no function is the step (each holds about a
  third of the device time), read whole, host-bound (dispatch).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
LOOP = HERE / "profile_loop.py"
OUT = HERE / "captures"
STEPS = "12"
"""Steps of each loop unless its scenario says otherwise (a later ``--steps`` wins)."""

KEEP_TRACE_JSON = ("forced_sync",)
"""Scenarios whose trace JSON is kept too (the same events, read with the standard library)."""

SCENARIOS = {
    "input_bound": ["--load-ms", "40", "--compute-ms", "5"],
    "forced_sync": ["--load-ms", "30", "--compute-ms", "30", "--sync", "float"],
    "compute_bound": ["--load-ms", "2", "--compute-ms", "40", "--sync", "float"],
    "host_bound": ["--small-calls", "50"],
    "no_markers": ["--load-ms", "40", "--compute-ms", "5", "--no-markers"],
    "block_no_markers": ["--load-ms", "30", "--compute-ms", "30", "--sync", "block",
                         "--no-markers", "--steps", "10"],
    "small_fns_no_markers": ["--small-calls", "100", "--small-fns", "3", "--no-markers",
                             "--steps", "4"],
}


def capture(name: str, args: list[str]) -> pathlib.Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(LOOP), tmp, "--steps", STEPS, *args], check=True)
        (pb,) = pathlib.Path(tmp).glob("plugins/profile/*/*.xplane.pb")
        target = OUT / f"{name}.xplane.pb"
        shutil.copyfile(pb, target)
        if name in KEEP_TRACE_JSON:
            shutil.copyfile(pb.with_name(pb.name.replace(".xplane.pb", ".trace.json.gz")),
                            OUT / f"{name}.trace.json.gz")
    return target


def main() -> None:
    OUT.mkdir(exist_ok=True)
    names = sys.argv[1:] or list(SCENARIOS)
    for name in names:
        print(capture(name, SCENARIOS[name]))


if __name__ == "__main__":
    main()
