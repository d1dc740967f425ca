"""Run MaxText's own trainer on CPU and keep what it writes: its log (stdout and stderr, every
line, as MaxText wrote them) and its ``profiler=xplane`` capture.

    python make_artifacts.py OUT_DIR                 # with MaxText's Python (3.12 venv)

The run: MaxText 0.2.5's ``maxtext.trainers.pre_train.train`` on its ``base.yml`` with a
tiny two-layer model on synthetic data (vocabulary 256), ``STEPS`` steps, an async
checkpoint every 10 steps, an eval (2 batches) every 10 steps, and the XLA profiler over
``PROFILER_STEPS`` steps after the first ``SKIP`` (compilation left out). It writes

- ``OUT_DIR/maxtext_cpu_profile.log``: the log;
- ``OUT_DIR/capture/plugins/profile/<run>/<host>.trace.json.gz`` (and ``.xplane.pb``
  unless ``--no-xplane``): the capture, as ``jax.profiler`` wrote it under the run's
  ``tensorboard`` folder.

Nothing is edited. The run needs no network (``DECOUPLE_GCLOUD=TRUE``, ``JAX_PLATFORMS=cpu``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

STEPS = 25
SKIP = 3
PROFILER_STEPS = 20
TINY = ("hardware=cpu skip_jax_distributed_system=true jax_cache_dir= log_config=false "
        "enable_goodput_recording=false monitor_goodput=false enable_gcp_goodput_metrics=false "
        "enable_gcp_step_deviation_metrics=false base_emb_dim=64 base_num_query_heads=4 "
        "base_num_kv_heads=4 head_dim=16 base_mlp_dim=128 base_num_decoder_layers=2 "
        "max_target_length=128 per_device_batch_size=4 attention=dot_product dtype=float32 "
        "dataset_type=synthetic vocab_size=256 log_period=10").split()


def command(site: pathlib.Path, workdir: pathlib.Path, steps: int = STEPS, skip: int = SKIP,
            profiler_steps: int = PROFILER_STEPS) -> list[str]:
    """MaxText's train command for the run (``site``: MaxText's package folder)."""
    return [sys.executable, "-m", "maxtext.trainers.pre_train.train",
            str(site / "configs" / "base.yml"), "run_name=cpu_profile",
            f"base_output_directory={workdir}", *TINY, f"steps={steps}",
            "enable_checkpointing=true", "async_checkpointing=true", "checkpoint_period=10",
            "eval_interval=10", "eval_steps=2", "profiler=xplane",
            f"skip_first_n_steps_for_profiler={skip}", f"profiler_steps={profiler_steps}"]


def run(out: pathlib.Path, keep_xplane: bool = True) -> pathlib.Path:
    """Train, then copy the log and the capture into ``out``; returns the capture's run
    folder."""
    import maxtext  # lazy: only MaxText's Python can run this

    site = pathlib.Path(maxtext.__file__).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DECOUPLE_GCLOUD": "TRUE", "JAX_PLATFORMS": "cpu",
           "TF_CPP_MIN_LOG_LEVEL": "0"}
    with tempfile.TemporaryDirectory(prefix="maxtext-artifacts-") as tmp:
        work = pathlib.Path(tmp)
        proc = subprocess.run(command(site, work), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env, timeout=1200)
        (out / "maxtext_cpu_profile.log").write_bytes(proc.stdout)
        if proc.returncode != 0:
            raise SystemExit(f"MaxText's train exited {proc.returncode}; see "
                             f"{out / 'maxtext_cpu_profile.log'}")
        runs = sorted((work / "cpu_profile" / "tensorboard" / "plugins" / "profile").iterdir())
        if not runs:
            raise SystemExit("MaxText wrote no capture (profiler=xplane)")
        dest = out / "capture" / "plugins" / "profile" / runs[-1].name
        dest.mkdir(parents=True, exist_ok=True)
        for f in runs[-1].iterdir():
            if f.name.endswith(".trace.json.gz") or (keep_xplane and f.suffix == ".pb"):
                shutil.copy2(f, dest / f.name)
    return dest


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=pathlib.Path)
    p.add_argument("--no-xplane", action="store_true",
                   help="keep only the trace JSON of the capture (smaller)")
    a = p.parse_args()
    dest = run(a.out, keep_xplane=not a.no_xplane)
    for f in sorted(dest.iterdir()):
        print(f, f.stat().st_size)


if __name__ == "__main__":
    main()
