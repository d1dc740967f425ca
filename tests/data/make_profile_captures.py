"""Make the committed jax.profiler captures of tests/data/captures/ (CPU, this machine's JAX).

usage: python tests/data/make_profile_captures.py

Each capture is ``profile_loop.py`` run as a user would run it, with a real
``jax.profiler.start_trace``; only the ``.xplane.pb`` is kept (the trace JSON beside it
is not read). The numbers are chosen so each verdict holds with a wide margin on a busy
2-core machine:

- ``input_bound``: a generator sleeping 30 ms per batch, ~10 ms of compute, no sync;
- ``forced_sync``: a generator of 15 ms, ~45 ms of compute, ``float(loss)`` every step in
  ``log_loss`` (the line marked FORCED-SYNC);
- ``compute_bound``: a generator of 2 ms, ~40 ms of compute, the same sync;
- ``host_bound``: 50 tiny jitted calls a step, no loading;
- ``no_markers``: ``input_bound`` without StepTraceAnnotation (needs --step-fn train_step).
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
STEPS = "10"

SCENARIOS = {
    "input_bound": ["--load-ms", "30", "--compute-ms", "10"],
    "forced_sync": ["--load-ms", "15", "--compute-ms", "45", "--sync", "float"],
    "compute_bound": ["--load-ms", "2", "--compute-ms", "40", "--sync", "float"],
    "host_bound": ["--small-calls", "50"],
    "no_markers": ["--load-ms", "30", "--compute-ms", "10", "--no-markers"],
}


def capture(name: str, args: list[str]) -> pathlib.Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(LOOP), tmp, "--steps", STEPS, *args], check=True)
        (pb,) = pathlib.Path(tmp).glob("plugins/profile/*/*.xplane.pb")
        target = OUT / f"{name}.xplane.pb"
        shutil.copyfile(pb, target)
    return target


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, args in SCENARIOS.items():
        print(capture(name, args))


if __name__ == "__main__":
    main()
