"""pipecheck on real MaxText (0.2.5) on CPU, in MaxText's own Python 3.12 environment.

The environment is the venv built from the lock file (docs/maxtext.md); its python is
``$PIPECHECK_MAXTEXT_PYTHON`` (default ``/tmp/v312mx/bin/python``). Without it these tests
are skipped, saying why. Two configs made the way users make them (a MaxText config file
with ``base_config`` and its keys, overrides on the command line):

- compute-bound: pre-tokenized ArrayRecord data, MaxText's 32k sentencepiece tokenizer and
  vocabulary: the output layer dominates the step, the pipeline keeps up at once;
- input-bound, fixed by tuning: long raw-text documents tokenized on the fly
  (``use_truncation``: one document a row) with ``grain_worker_count=0``: the training
  process tokenizes, the step waits; Grain workers take the tokenizer off it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAKE_CORPUS = ROOT / "tests" / "data" / "maxtext" / "make_corpus.py"
MAXTEXT_PYTHON = os.environ.get("PIPECHECK_MAXTEXT_PYTHON", "/tmp/v312mx/bin/python")


def _maxtext_site() -> pathlib.Path | None:
    """MaxText's package folder in its environment (None: no usable environment)."""
    if not os.path.isfile(MAXTEXT_PYTHON):
        return None
    out = subprocess.run([MAXTEXT_PYTHON, "-c", "import maxtext, os, pipecheck; "
                          "print(os.path.dirname(maxtext.__file__))"],
                         capture_output=True, text=True, timeout=120)
    return pathlib.Path(out.stdout.strip()) if out.returncode == 0 else None


SITE = _maxtext_site()
pytestmark = pytest.mark.skipif(
    SITE is None, reason=f"no MaxText environment at {MAXTEXT_PYTHON} with maxtext and "
    "pipecheck importable (build it as docs/maxtext.md says, or set PIPECHECK_MAXTEXT_PYTHON)")

TINY = {"hardware": "cpu", "skip_jax_distributed_system": True, "jax_cache_dir": "",
        "log_config": False, "enable_goodput_recording": False, "monitor_goodput": False,
        "enable_gcp_goodput_metrics": False, "enable_gcp_step_deviation_metrics": False,
        "base_emb_dim": 64, "base_num_query_heads": 4, "base_num_kv_heads": 4, "head_dim": 16,
        "base_mlp_dim": 128, "base_num_decoder_layers": 2, "max_target_length": 128,
        "per_device_batch_size": 4, "attention": "dot_product", "dtype": "float32",
        "steps": 100, "dataset_type": "grain", "grain_file_type": "arrayrecord",
        "tokenizer_type": "sentencepiece", "enable_checkpointing": False}


def _env() -> dict[str, str]:
    return {**os.environ, "DECOUPLE_GCLOUD": "TRUE", "JAX_PLATFORMS": "cpu",
            "PYTHONWARNINGS": "ignore"}


def _write_config(path: pathlib.Path, **keys: object) -> pathlib.Path:
    assert SITE is not None
    lines = [f"base_config: {SITE / 'configs' / 'base.yml'}"]
    lines += [f"{k}: {json.dumps(v)}" for k, v in {**TINY, **keys}.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    assert SITE is not None
    d = tmp_path_factory.mktemp("maxtext")
    run = [MAXTEXT_PYTHON, str(MAKE_CORPUS)]
    subprocess.run([*run, str(d / "ids"), "--files", "4", "--docs", "200", "--tokens", "100"],
                   check=True, capture_output=True, timeout=300)
    subprocess.run([*run, str(d / "long"), "--files", "4", "--docs", "16", "--words", "40000",
                    "--tokenizer", str(d / "tok")], check=True, capture_output=True, timeout=300)
    out = str(d / "out")
    return {
        "compute": _write_config(
            d / "compute.yml", base_output_directory=out, run_name="compute",
            grain_train_files=str(d / "ids" / "*.array_record"), tokenize_train_data=False,
            tokenizer_path=str(SITE / "assets" / "tokenizers" / "tokenizer.default"),
            vocab_size=32768),
        "input": _write_config(
            d / "input.yml", base_output_directory=out, run_name="input",
            grain_train_files=str(d / "long" / "*.array_record"), tokenize_train_data=True,
            use_truncation=True, tokenizer_path=str(d / "tok.model"), vocab_size=256,
            grain_worker_count=0, num_epoch=100),
        "dir": d,
    }


def _pipecheck(*args: str, timeout: int = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MAXTEXT_PYTHON, "-m", "pipecheck", *args], capture_output=True,
                          text=True, env=_env(), timeout=timeout, cwd=ROOT)


def _compare(config: pathlib.Path, out: pathlib.Path, *extra: str) -> dict:
    proc = _pipecheck("compare", "--maxtext", str(config), *extra, "--steps", "30",
                      "--target-steps", "20", "--batches", "16", "--quiet", "--force",
                      "--json", str(out / "run.json"), "--save-config",
                      str(out / "saved.yml"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "run.json").read_text())


def test_compute_bound_config_is_compute_bound(configs: dict[str, pathlib.Path],
                                                tmp_path: pathlib.Path) -> None:
    run = _compare(configs["compute"], tmp_path, "log_period=5")
    assert run["verdict"] == "compute-bound", run["verdict_reason"]
    assert run["loader_step_s"] < run["target_step_s"]
    saved = (tmp_path / "saved.yml").read_text()
    assert f"base_config: {configs['compute']}" in saved
    assert "log_period: 5" in saved and "grain_worker_count:" in saved


def test_input_bound_config_is_fixed_by_maxtexts_grain_keys(
        configs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    run = _compare(configs["input"], tmp_path)
    assert run["verdict"] == "input-bound", run["verdict_reason"]
    by_workers = {s["workers"]: s for s in run["loader"]}
    assert 0 in by_workers and run["chosen_workers"] > 0
    chosen = run["tuning"]["chosen"]
    assert f"grain_worker_count={chosen['workers']} " in run["recommendation"]
    assert "grain_per_worker_buffer_size=" in run["recommendation"]
    saved = (tmp_path / "saved.yml").read_text()
    assert f"grain_worker_count: {chosen['workers']}" in saved
    # the saved file is a MaxText config: MaxText reads it, with the chosen Grain keys
    check = subprocess.run(
        [MAXTEXT_PYTHON, "-c", "import sys; from maxtext.configs import pyconfig; "
         "c = pyconfig.initialize(['train', sys.argv[1]]); print(c.grain_worker_count)",
         str(tmp_path / "saved.yml")], capture_output=True, text=True, env=_env(), timeout=300)
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.strip().splitlines()[-1] == str(chosen["workers"])


@pytest.mark.parametrize("extra, named", [
    (("no_such_key=3",), "'no_such_key'"),
    (("grain_train_files=/nonexistent/*.array_record",), "/nonexistent/*.array_record"),
    (("tokenizer_path=/nonexistent/tok.model",), "/nonexistent/tok.model"),
    (("grain_worker_count=many",), "grain_worker_count"),
])
def test_a_maxtext_config_error_is_one_line(configs: dict[str, pathlib.Path],
                                            extra: tuple[str, ...], named: str) -> None:
    proc = _pipecheck("dataloader", "--maxtext", str(configs["input"]), *extra,
                      "--batches", "3", timeout=300)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("pipecheck: error")]
    assert len(errors) == 1 and named in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


def test_dataloader_measures_each_setting_of_maxtexts_grain_keys(
        configs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    out = tmp_path / "d.json"
    proc = _pipecheck("dataloader", "--maxtext", str(configs["input"]), "--workers", "0,2",
                      "--batches", "12", "--quiet", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [r["workers"] for r in results] == [0, 2]
    # the config's own read keys (base.yml: 16 threads, a prefetch buffer of 500) kept
    assert {r["threads"] for r in results} == {16}
    # the tokenizer runs in the training process at workers=0: two workers beat it
    assert results[1]["loader_time"]["value"] < results[0]["loader_time"]["value"]


def test_synthetic_runs_maxtexts_train_step(configs: dict[str, pathlib.Path],
                                            tmp_path: pathlib.Path) -> None:
    out = tmp_path / "s.json"
    proc = _pipecheck("synthetic", "--maxtext", str(configs["compute"]), "--steps", "8",
                      "--quiet", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["config"]["workload"] == "maxtext"
    assert result["compile"]["train_step_compiles"] == 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
