"""pipecheck profile and XProf's input-pipeline analyzer side by side on the four loops of
docs/profile.md (issue 19): each captured live with jax.profiler on this machine.

    PYTHONPATH=. nice python benchmarks/xprof_comparison.py   (needs pipecheck[xprof])

The loops are tests/data/profile_loop.py with StepTraceAnnotation markers (as XProf asks):
a Python generator sleeping 30 ms per batch with ~10 ms of compute; a Grain MapDataset
whose map sleeps 30 ms, same compute; a Grain map of 15 ms with ~45 ms of compute and
float(loss) every step; a generator of 15 ms with the same sync. For each it prints the
step time, pipecheck's verdict and XProf's conclusion (its first sentence).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipecheck.logs.xprof_view import xprof_input_pipeline  # noqa: E402
from pipecheck.profiling import ProfileOptions, profile_capture  # noqa: E402
from pipecheck.records.kinds import verdict_text  # noqa: E402

LOOPS = {
    "generator 30 ms, compute 10 ms": ["--load-ms", "30", "--compute-ms", "10"],
    "Grain map 30 ms, compute 10 ms": ["--loader", "grain", "--load-ms", "30",
                                       "--compute-ms", "10"],
    "Grain map 15 ms, compute 45 ms, float(loss)": ["--loader", "grain", "--load-ms", "15",
                                                    "--compute-ms", "45", "--sync", "float"],
    "generator 15 ms, compute 45 ms, float(loss)": ["--load-ms", "15", "--compute-ms", "45",
                                                    "--sync", "float"],
}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, args) in enumerate(LOOPS.items()):
            out = pathlib.Path(tmp) / f"loop{i}"
            subprocess.run([sys.executable, str(REPO / "tests" / "data" / "profile_loop.py"),
                            str(out), "--steps", "25", *args], check=True, capture_output=True)
            r = profile_capture(ProfileOptions(str(out), source_dirs=(str(REPO / "tests"),)))
            x = xprof_input_pipeline(sorted(out.glob("plugins/profile/*/*.xplane.pb")))
            verdict = verdict_text(r.verdict)
            sync = next((f.message for f in r.findings if f.kind == "forced-sync"), "")
            print(f"{name}\n  step {1e3 * r.estimates.step.value:.1f} ms; pipecheck: {verdict}"
                  f"{'; ' + sync if sync else ''}\n  XProf: {x.conclusion.split('. ')[0]}.\n")


if __name__ == "__main__":
    main()
