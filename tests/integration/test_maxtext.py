"""pipecheck on real MaxText (0.2.5) on CPU, in MaxText's own Python 3.12 environment.

The environment is the venv built from the lock file (docs/maxtext.md); its python is
``$PIPECHECK_MAXTEXT_PYTHON`` (unset: ``/tmp/v312mx/bin/python`` where it exists; set to the
empty string: no MaxText here, as CI's Python 3.11 venv says). Without it these tests are
skipped, saying why. Two configs made the way users make them (a MaxText config file with
``base_config`` and its keys, overrides on the command line):

- compute-bound: pre-tokenized ArrayRecord data (MaxText's sentencepiece tokenizer for its pad
  id), a vocabulary of 8192: the output layer dominates the step, so the main thread's
  loading (the tuner picks 0 workers) competing with compute for the two cores stays a small
  share of it (with 2048, R came out a third above T on CI's busy machine), the pipeline
  keeps up at once; MaxText's eval every 20 steps (2 batches of the same files), which R
  runs as MaxText's loop does, tagged and kept out of the steady state;
- input-bound: long raw-text documents (books of 120,000 words) tokenized on the fly with
  ``use_truncation`` (one document a row: the whole book is tokenized to keep 128 tokens),
  ``grain_worker_count=0 grain_num_threads=1``: the tokenizer needs several times the step.

Everything expensive runs once per module (the two compare runs, one process for the
other commands); the tests assert on those runs. The whole module takes about 3 minutes on
the shared 2-core machine.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAKE_CORPUS = ROOT / "tests" / "data" / "maxtext" / "make_corpus.py"
MAKE_ARTIFACTS = ROOT / "tests" / "data" / "maxtext" / "make_artifacts.py"
REAL_LOG = ROOT / "tests" / "data" / "real" / "maxtext_cpu_profiler_async_ckpt_eval.log"
CALLS = pathlib.Path(__file__).resolve().parent / "maxtext_calls.py"
DEFAULT_PYTHON = "/tmp/v312mx/bin/python"


def maxtext_python(environ: dict[str, str]) -> tuple[str | None, str]:
    """MaxText's python from ``$PIPECHECK_MAXTEXT_PYTHON`` and why there is none: unset ->
    the default venv where it exists; empty -> none (no fall-back); a path -> that path."""
    given = environ.get("PIPECHECK_MAXTEXT_PYTHON")
    if given == "":
        return None, "PIPECHECK_MAXTEXT_PYTHON is empty: no MaxText environment here"
    path = given if given is not None else DEFAULT_PYTHON
    if not os.path.isfile(path):
        how = "PIPECHECK_MAXTEXT_PYTHON names" if given is not None else "the default is"
        return None, (f"{how} {path}, which does not exist (build MaxText's venv as "
                      "docs/maxtext.md says, or set PIPECHECK_MAXTEXT_PYTHON)")
    return path, ""


def _maxtext_site(python: str | None) -> tuple[pathlib.Path | None, str]:
    """MaxText's package folder in its environment, or why there is none."""
    if python is None:
        return None, ""
    out = subprocess.run([python, "-c", "import maxtext, os, pipecheck; "
                          "print(os.path.dirname(maxtext.__file__))"],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return None, (f"{python} cannot import maxtext and pipecheck: "
                      f"{(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return pathlib.Path(out.stdout.strip()), ""


MAXTEXT_PYTHON, _WHY_NOT = maxtext_python(dict(os.environ))
SITE, _WHY_NOT_SITE = _maxtext_site(MAXTEXT_PYTHON)
needs_maxtext = pytest.mark.skipif(SITE is None, reason=_WHY_NOT or _WHY_NOT_SITE)
"""Every test but the one of ``maxtext_python`` itself runs real MaxText."""

TINY = {"hardware": "cpu", "skip_jax_distributed_system": True, "jax_cache_dir": "",
        "log_config": False, "enable_goodput_recording": False, "monitor_goodput": False,
        "enable_gcp_goodput_metrics": False, "enable_gcp_step_deviation_metrics": False,
        "base_emb_dim": 64, "base_num_query_heads": 4, "base_num_kv_heads": 4, "head_dim": 16,
        "base_mlp_dim": 128, "base_num_decoder_layers": 2, "max_target_length": 128,
        "per_device_batch_size": 4, "attention": "dot_product", "dtype": "float32",
        "steps": 100, "dataset_type": "grain", "grain_file_type": "arrayrecord",
        "tokenizer_type": "sentencepiece", "enable_checkpointing": False}
EVAL_INTERVAL = 20
"""The compute config's MaxText eval_interval: R's 60 steps evaluate after steps 0, 20, 40."""
GRAIN_KEYS = ("grain_worker_count", "grain_per_worker_buffer_size", "grain_num_threads",
              "grain_prefetch_buffer_size")


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
    assert SITE is not None and MAXTEXT_PYTHON is not None
    d = tmp_path_factory.mktemp("maxtext")
    run = [MAXTEXT_PYTHON, str(MAKE_CORPUS)]
    subprocess.run([*run, str(d / "ids"), "--files", "4", "--docs", "200", "--tokens", "100"],
                   check=True, capture_output=True, timeout=300)
    subprocess.run([*run, str(d / "long"), "--files", "4", "--docs", "8", "--words", "120000",
                    "--tokenizer", str(d / "tok")], check=True, capture_output=True, timeout=300)
    out = str(d / "out")
    return {
        "compute": _write_config(
            d / "compute.yml", base_output_directory=out, run_name="compute",
            grain_train_files=str(d / "ids" / "*.array_record"), tokenize_train_data=False,
            tokenizer_path=str(SITE / "assets" / "tokenizers" / "tokenizer.default"),
            vocab_size=8192, eval_interval=EVAL_INTERVAL, eval_steps=2,
            grain_eval_files=str(d / "ids" / "*.array_record"), tokenize_eval_data=False,
            grain_worker_count_eval=0),
        "input": _write_config(
            d / "input.yml", base_output_directory=out, run_name="input",
            grain_train_files=str(d / "long" / "*.array_record"), tokenize_train_data=True,
            use_truncation=True, tokenizer_path=str(d / "tok.model"), vocab_size=256,
            grain_worker_count=0, grain_num_threads=1, num_epoch=100),
        "dir": d,
    }


def _pipecheck(*args: str, timeout: int = 400, tmpdir: pathlib.Path | None = None
               ) -> subprocess.CompletedProcess[str]:
    assert MAXTEXT_PYTHON is not None
    env = _env() if tmpdir is None else {**_env(), "TMPDIR": str(tmpdir)}
    return subprocess.run([MAXTEXT_PYTHON, "-m", "pipecheck", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def _why(run: dict) -> str:
    """What an assertion on a compare run shows when it fails: the verdict's reason and
    numbers."""
    return f"{run['verdict_reason']}; estimates {run['estimates']}; spans {run['host_spans']}"


def _compare(config: pathlib.Path, out: pathlib.Path, *extra: str) -> dict:
    """compare on ``config``: its JSON record, and the saved MaxText config's text. Enough
    steps and batches that no estimate's interval is wider than the verdict's noise limit
    on the busy machine (then the verdict holds however the machine's speed drifts
    between the measurements of T, D and R)."""
    tmp = out / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    proc = _pipecheck("compare", "--maxtext", str(config), *extra, "--target-steps", "40",
                      "--quiet", "--force",
                      "--json", str(out / "run.json"), "--save-config",
                      str(out / "saved.yml"), tmpdir=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    return {**run, "json_path": str(out / "run.json"), "saved_path": str(out / "saved.yml"),
            "saved": (out / "saved.yml").read_text(), "stdout": proc.stdout,
            "left_in_tmp": sorted(p.name for p in tmp.glob("pipecheck-maxtext-*"))}


@pytest.fixture(scope="module")
def compute_run(configs: dict[str, pathlib.Path]) -> dict:
    # MaxText's async checkpoint every 30 steps (R saves after steps 0 and 30, as MaxText does,
    # to a folder of its own).
    # 30 batches for D: at 12, one batch of 287 ms among batches of 2.4 ms (CI, a one-off
    # stall) made D's mean 26 ms with an interval of 2.4-54 ms, too noisy to decide on
    # against T's 56 ms; 18 batches more cost ~50 ms at the setting chosen
    # MaxText's profiler (xplane) over its default steps, 1 to 5.
    return _compare(configs["compute"], configs["dir"] / "compute-run", "log_period=5",
                    "enable_checkpointing=true", "async_checkpointing=true",
                    "checkpoint_period=30", "profiler=xplane", "--steps", "60",
                    "--batches", "30")


@pytest.fixture(scope="module")
def input_run(configs: dict[str, pathlib.Path]) -> dict:
    # one setting, the config's own (MaxText's grain_worker_count=0 grain_num_threads=1): on
    # two shared cores no Grain setting reliably beats it (docs/maxtext.md says why)
    return _compare(configs["input"], configs["dir"] / "input-run", "--workers", "0",
                    "--threads", "1", "--steps", "80", "--batches", "30")


ERRORS = (
    (("no_such_key=3",), "'no_such_key'"),
    (("grain_train_files=/nonexistent/*.array_record",), "/nonexistent/*.array_record"),
    (("tokenizer_path=/nonexistent/tok.model",), "/nonexistent/tok.model"),
    (("grain_worker_count=many",), "grain_worker_count"),
    # MaxText refuses an eval without eval data: its reason, without pydantic's dump
    (("eval_interval=5",), "MaxText config: Please specify grain_eval_files"),
)


@pytest.fixture(scope="module")
def artifacts(configs: dict[str, pathlib.Path]) -> dict[str, pathlib.Path]:
    """MaxText's own trainer on CPU (make_artifacts.py: 25 steps, profiler=xplane over 20
    of them, async checkpoints and evals every 10): its log and its capture. Made here, not
    committed: the capture of 20 steps is 4-7 MB (MaxText's Python tracer, on by default)."""
    assert MAXTEXT_PYTHON is not None
    out = configs["dir"] / "artifacts"
    proc = subprocess.run([MAXTEXT_PYTHON, str(MAKE_ARTIFACTS), str(out)], capture_output=True,
                          text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"log": out / "maxtext_cpu_profile.log", "capture": out / "capture"}


def _start_monitored(d: pathlib.Path) -> subprocess.Popen[str]:
    """MaxText's own train under ``python -m pipecheck.monitor.maxtext`` (15 steps, async
    checkpoints and evals every 5), started beside the other commands (its test asserts
    tags, spans and sync sites, not times): the Monitor's record goes to monitor.json."""
    assert MAXTEXT_PYTHON is not None and SITE is not None
    args = [str(SITE / "configs" / "base.yml"), "run_name=monitored",
            f"base_output_directory={d / 'monitored'}", *make_artifacts_tiny(), "steps=15",
            "enable_checkpointing=true", "async_checkpointing=true", "checkpoint_period=5",
            "eval_interval=5", "eval_steps=2"]
    return subprocess.Popen([MAXTEXT_PYTHON, "-m", "pipecheck.monitor.maxtext", "--save",
                             str(d / "monitor.json"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=_env(), cwd=ROOT)


def make_artifacts_tiny() -> list[str]:
    """make_artifacts.py's tiny model on synthetic data (its ``TINY`` overrides)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_artifacts", MAKE_ARTIFACTS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.TINY)


@pytest.fixture(scope="module")
def calls(configs: dict[str, pathlib.Path], compute_run: dict, input_run: dict,
          artifacts: dict[str, pathlib.Path]) -> dict[str, dict]:
    """The other commands, in one process of MaxText's Python, by name: the four config
    errors, a dataloader run on the compute config, MaxText's reading
    of the two saved configs, and import, profile and diff on the trainer's artifacts;
    beside them, MaxText's train under the Monitor (``monitored``)."""
    assert MAXTEXT_PYTHON is not None
    d = configs["dir"]
    todo: dict[str, list[str]] = {
        f"error{i}": ["pipecheck", "dataloader", "--maxtext", str(configs["input"]), *extra,
                      "--batches", "3"] for i, (extra, _) in enumerate(ERRORS)}
    todo.update({
        "dataloader": ["pipecheck", "dataloader", "--maxtext", str(configs["compute"]),
                       "--workers", "0", "--batches", "4", "--quiet", "--json",
                       str(d / "d.json"), "--force"],
        "compute-saved": ["maxtext-config", compute_run["saved_path"], "log_period", "profiler",
                          *GRAIN_KEYS],
        "input-saved": ["maxtext-config", input_run["saved_path"], *GRAIN_KEYS],
        "profile": ["pipecheck", "profile", str(artifacts["capture"]), "--quiet", "--json",
                    str(d / "profile.json"), "--force"],
        "import": ["pipecheck", "import", str(artifacts["log"]), "--quiet", "--json",
                   str(d / "import.json"), "--force"],
        "diff-same-run": ["pipecheck", "diff", str(d / "import.json"), str(d / "profile.json"),
                          "--quiet", "--json", str(d / "diff-same.json"), "--force"],
        "diff-logs": ["pipecheck", "diff", str(REAL_LOG), str(artifacts["log"]), "--quiet",
                      "--json", str(d / "diff-logs.json"), "--force"],
    })
    (d / "calls.json").write_text(json.dumps(list(todo.values())))
    monitored = _start_monitored(d)
    proc = subprocess.run([MAXTEXT_PYTHON, str(CALLS), str(d / "calls.json")],
                          capture_output=True, text=True, env=_env(), timeout=400, cwd=ROOT)
    monitor_out, _ = monitored.communicate(timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = dict(zip(todo, json.loads(proc.stdout.rsplit("\nRESULTS ", 1)[1]), strict=True))
    results["monitored"] = {"rc": monitored.returncode, "stdout": monitor_out, "stderr": ""}
    return results


def _ok(result: dict) -> None:
    assert result["rc"] == 0, result["stdout"][-2000:] + result["stderr"][-3000:]


def test_an_empty_maxtext_python_means_none_here_without_fall_back() -> None:
    assert maxtext_python({"PIPECHECK_MAXTEXT_PYTHON": ""})[0] is None
    assert "empty" in maxtext_python({"PIPECHECK_MAXTEXT_PYTHON": ""})[1]
    assert maxtext_python({"PIPECHECK_MAXTEXT_PYTHON": sys.executable})[0] == sys.executable
    missing = maxtext_python({"PIPECHECK_MAXTEXT_PYTHON": "/nonexistent/python"})
    assert missing[0] is None and "/nonexistent/python" in missing[1]
    unset = maxtext_python({})
    assert unset[0] == (DEFAULT_PYTHON if os.path.isfile(DEFAULT_PYTHON) else None)


@needs_maxtext
def test_compute_bound_config_is_compute_bound(compute_run: dict) -> None:
    assert compute_run["verdict"] == "compute-bound", _why(compute_run)
    est = compute_run["estimates"]
    assert est["loader"]["high"] < est["target"]["low"], _why(compute_run)
    # R ran MaxText's own metric logger after every step
    assert compute_run["host_spans"].get("log", 0.0) > 0.0


@needs_maxtext
def test_the_configs_own_grain_keys_are_measured_first_or_why_not_is_said(
        compute_run: dict) -> None:
    # the compute config leaves MaxText's defaults (1 worker, 16 threads, a read prefetch of
    # 500 elements): compare measures the run as loaded first, or, where its 800 records
    # cannot fill that prefetch, says the setting was not measured and why
    first = compute_run["loader"][0]["settings"]
    if (first["workers"], first["threads"], first["prefetch"]) == (1, 16, 500):
        return
    [note] = [w for w in compute_run["warnings"] if "the config's own setting" in w]
    assert "was not measured" in note and "ran out of batches" in note, note
    assert "workers=1" in note and "threads=16" in note, note


@needs_maxtext
def test_r_runs_maxtexts_eval_at_its_interval_kept_out_of_the_steady_state(
        compute_run: dict) -> None:
    from pipecheck.records import store

    run = store.load(compute_run["json_path"])
    steps = [run.steps[i] for i in range(len(run.steps))]
    assert [s.step for s in steps] == list(range(60))
    tagged = [s.step for s in steps if "eval" in s.tags]
    timed = [s.step for s in steps if (s.spans or {}).get("eval", 0.0) > 0]
    # MaxText's loop evaluates after steps 0, 20 and 40 (eval_interval=20), only those
    assert tagged == timed == [0, 20, 40], (tagged, timed)
    # the evals are kept out of the steady state (the verdict is asserted above)
    assert compute_run["host_spans"].get("eval", 0.0) == 0.0, _why(compute_run)


@needs_maxtext
def test_r_saves_maxtexts_checkpoint_of_a_grain_config(compute_run: dict) -> None:
    from pipecheck.records import store

    run = store.load(compute_run["json_path"])
    steps = [run.steps[i] for i in range(len(run.steps))]
    # MaxText's rule: every checkpoint_period steps, and step 0 (save_checkpoint_on_start,
    # its default), the step whose compile keeps it out of the steady state anyway
    assert [s.step for s in steps if "checkpoint" in s.tags] == [0, 30]
    assert [s.step for s in steps if (s.spans or {}).get("checkpoint", 0.0) > 0] == [0, 30]
    assert compute_run["host_spans"].get("checkpoint", 0.0) == 0.0, _why(compute_run)


@needs_maxtext
def test_r_runs_maxtexts_profiler_on_its_steps(compute_run: dict) -> None:
    from pipecheck.records import store

    run = store.load(compute_run["json_path"])
    steps = [run.steps[i] for i in range(len(run.steps))]
    # MaxText's defaults: skip 1 step, profile 5; step 0's host work starts the profiler
    assert [s.step for s in steps if "profile" in s.tags] == [0, 1, 2, 3, 4, 5]
    steady = sorted(s.time_s for s in steps if not set(s.tags) & {"profile", "checkpoint",
                                                                  "eval", "compile"})
    median = steady[len(steady) // 2]
    # the profiler really ran: stopping it writes its capture, in the hooks of step 5 (seen:
    # 271 ms against a median of 68 ms; the profiled steps 76-82 ms), the slowest of steps
    # 1 to 10 (step 0 compiles)
    times = [s.time_s for s in steps[:11]]
    assert max(range(1, 11), key=times.__getitem__) == 5 and times[5] > 2 * median, times
    # and the report names it: the profiler's span holds the slow step's extra time
    causes = {a["step"]: a["cause"] for a in compute_run["anomalies"]}
    assert causes.get(5) == "profiler", compute_run["anomalies"]


@needs_maxtext
def test_saved_config_is_a_maxtext_config_with_the_chosen_keys(
        configs: dict[str, pathlib.Path], compute_run: dict, calls: dict[str, dict]) -> None:
    assert f"base_config: {configs['compute']}" in compute_run["saved"]
    read = calls["compute-saved"]["values"]
    chosen = compute_run["tuning"]["chosen"]
    assert read["log_period"] == 5 and read["profiler"] == "xplane"  # the user's overrides
    assert [read[k] for k in GRAIN_KEYS] == [
        chosen["workers"], chosen["per_worker_buffer"], chosen["threads"], chosen["prefetch"]]


@needs_maxtext
def test_input_bound_config_is_input_bound(input_run: dict, calls: dict[str, dict]) -> None:
    assert input_run["verdict"] == "input-bound", _why(input_run)
    est = input_run["estimates"]
    # the tokenizer needs several times the step: a margin no busy machine closes
    assert est["loader"]["low"] > 2 * est["target"]["high"], _why(input_run)
    assert input_run["host_spans"]["data_wait"] > 0.5 * est["real"]["value"], \
        _why(input_run)
    slow = [f for f in input_run["findings"] if f["kind"] == "slow-stage"]
    assert slow and "TokenizeAndTrim" in slow[0]["message"]
    # the recommendation and the saved file name MaxText's own keys, as MaxText reads them
    chosen = input_run["tuning"]["chosen"]
    keys = [chosen["workers"], chosen["per_worker_buffer"], chosen["threads"],
            chosen["prefetch"]]
    named = " ".join(f"{k}={v}" for k, v in zip(GRAIN_KEYS, keys, strict=True))
    assert named in input_run["recommendation"]
    assert [calls["input-saved"]["values"][k] for k in GRAIN_KEYS] == keys


@needs_maxtext
@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_a_maxtext_config_error_is_one_line(calls: dict[str, dict], index: int) -> None:
    result, named = calls[f"error{index}"], ERRORS[index][1]
    assert result["rc"] != 0
    errors = [line for line in result["stderr"].splitlines()
              if line.startswith("pipecheck: error")]
    assert len(errors) == 1 and named in errors[0], result["stderr"][-3000:]
    assert "Traceback" not in result["stderr"]


@needs_maxtext
def test_dataloader_keeps_the_configs_own_read_keys(configs: dict[str, pathlib.Path],
                                                    calls: dict[str, dict]) -> None:
    _ok(calls["dataloader"])
    results = json.loads((configs["dir"] / "d.json").read_text())["results"]
    assert [r["settings"]["workers"] for r in results] == [0]
    # the knobs not given keep the config's own (base.yml: 16 threads, a prefetch of 500)
    assert {(r["settings"]["threads"], r["settings"]["prefetch"]) for r in results} == \
        {(16, 500)}


@needs_maxtext
def test_t_runs_maxtexts_train_step_compiled_once(compute_run: dict) -> None:
    # T is `synthetic`'s measurement (the same code as `pipecheck synthetic --maxtext`)
    assert compute_run["config"]["workload"] == "maxtext"
    assert compute_run["compile"]["train_step_compiles"] == 1


@needs_maxtext
def test_profile_of_maxtexts_own_capture_names_its_sync_and_saves(
        configs: dict[str, pathlib.Path], calls: dict[str, dict]) -> None:
    _ok(calls["profile"])
    prof = json.loads((configs["dir"] / "profile.json").read_text())
    assert prof["verdict"] != "inconclusive", prof["reason"]
    # MaxText's own per-step sync, by file and function: its metric logger's host read
    syncs = [f for f in prof["findings"] if "metric_logger.py" in (f.get("location") or "")]
    assert syncs and "_log_training_metrics" in syncs[0]["message"], prof["findings"]
    # the async saves of steps 10 and 20 (checkpoint_period=10) are the slow steps' cause
    causes = {a["step"]: a["cause"] for a in prof["anomalies"]}
    assert causes.get(10) == "checkpoint" and causes.get(20) == "checkpoint", causes


@needs_maxtext
def test_import_reads_maxtexts_own_log(configs: dict[str, pathlib.Path],
                                       calls: dict[str, dict]) -> None:
    _ok(calls["import"])
    run = json.loads((configs["dir"] / "import.json").read_text())
    assert run["steps"]["n"] == 25  # steps 0..24, every one MaxText logged
    causes = {a["step"]: a["cause"] for a in run["anomalies"]}
    assert causes.get(0) == "compilation" and causes.get(1) == "evaluation", causes


@needs_maxtext
def test_the_log_and_the_capture_of_one_run_agree(configs: dict[str, pathlib.Path],
                                                  calls: dict[str, dict]) -> None:
    _ok(calls["diff-same-run"])
    rows = {r["name"]: r for r in json.loads(
        (configs["dir"] / "diff-same.json").read_text())["rows"]}
    median = rows["step time median"]
    assert median["ci_low"] <= 0.0 <= median["ci_high"], median


@needs_maxtext
def test_diff_of_two_real_maxtext_cpu_logs(configs: dict[str, pathlib.Path],
                                           calls: dict[str, dict]) -> None:
    _ok(calls["diff-logs"])
    diff = json.loads((configs["dir"] / "diff-logs.json").read_text())
    assert diff["a"]["source"].endswith(REAL_LOG.name), diff["a"]
    assert diff["b"]["source"].endswith("maxtext_cpu_profile.log"), diff["b"]


@needs_maxtext
def test_a_monitor_in_maxtexts_own_loop(configs: dict[str, pathlib.Path],
                                        calls: dict[str, dict]) -> None:
    from pipecheck.records import store

    _ok(calls["monitored"])
    run = store.load(str(configs["dir"] / "monitor.json"))
    steps = [run.steps[i] for i in range(len(run.steps))]
    assert [s.step for s in steps] == list(range(15))
    tagged = {name: [s.step for s in steps if name in s.tags] for name in ("checkpoint", "eval")}
    # MaxText saves at steps 0, 5 and 10 (checkpoint_period=5) and after the last one (14),
    # and evaluates after steps 0, 5 and 10 (eval_interval=5)
    assert tagged == {"checkpoint": [0, 5, 10, 14], "eval": [0, 5, 10]}, tagged
    seen = {name for s in steps for name, v in (s.spans or {}).items() if v > 0}
    assert {"data_wait", "dispatch", "sync", "log", "checkpoint", "eval"} <= seen, seen
    # the sampler names MaxText's own syncs by file and function
    named = {(site.location.rsplit("/", 1)[-1].split(":")[0], site.function)
             for site in run.sync_sites if not site.internal}
    assert any(f in ("checkpointing.py", "metric_logger.py") for f, _ in named), named


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


@needs_maxtext
def test_r_leaves_no_folder_of_its_own_behind(compute_run: dict) -> None:
    """R's checkpoints and metrics go to a temporary folder of pipecheck's (never the run's
    own); it is gone when compare ends, the async save in flight included."""
    assert compute_run["left_in_tmp"] == []
