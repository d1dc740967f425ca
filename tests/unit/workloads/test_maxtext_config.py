"""The MaxText workload's pure parts, without MaxText: its config values, the Grain keys as
MaxText overrides, the saved MaxText config, and one-line errors from MaxText's exceptions."""

from __future__ import annotations

import click
import pytest
import yaml
from click.testing import CliRunner

from pipecheck.cli.group import cli
from pipecheck.errors import ConfigError
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.workloads import maxtext, resolve

SETTING = GrainSettings(workers=4, per_worker_buffer=2, threads=1, prefetch=2)


def test_overrides_are_kept_in_order_and_quoted() -> None:
    cfg = resolve(maxtext.config_of("run.yml", ["steps=10", "run_name=a b"]))
    assert cfg.workload == "maxtext"
    assert maxtext.argv_of(cfg, grain_worker_count=2) == [
        "train", "run.yml", "steps=10", "run_name=a b", "grain_worker_count=2"]


def test_an_override_that_is_not_key_value_is_refused() -> None:
    with pytest.raises(ConfigError, match="'steps' is not key=value"):
        maxtext.config_of("run.yml", ["steps"])


def test_the_setting_as_maxtext_overrides() -> None:
    assert maxtext.overrides_text(SETTING) == (
        "grain_worker_count=4 grain_per_worker_buffer_size=2 grain_num_threads=1 "
        "grain_prefetch_buffer_size=2")


def test_the_recommendation_names_maxtexts_keys() -> None:
    text = f"use {SETTING.advice()}: the loader then keeps up with compute"
    assert maxtext.recommendation(text, SETTING) == (
        "use MaxText's grain_worker_count=4 grain_per_worker_buffer_size=2 grain_num_threads=1 "
        "grain_prefetch_buffer_size=2: the loader then keeps up with compute")


def test_the_saved_config_is_a_maxtext_config_with_the_chosen_keys_last(tmp_path) -> None:
    cfg = resolve(maxtext.config_of(str(tmp_path / "run.yml"),
                                    ["steps=10", "grain_worker_count=0", "log_config=false"]))
    text = maxtext.saved_config_text(cfg, SETTING, {"verdict": "input-bound", "loader_s": 0.01})
    values = yaml.safe_load(text)
    assert values == {"base_config": str(tmp_path / "run.yml"), "steps": 10,
                      "grain_worker_count": 4, "log_config": False,
                      "grain_per_worker_buffer_size": 2, "grain_num_threads": 1,
                      "grain_prefetch_buffer_size": 2}
    assert "# measured: verdict=input-bound, loader_s=0.01" in text


class ValidationError(Exception):
    """Shaped as pydantic's: a count line, the key, then why."""


@pytest.mark.parametrize("error, expected", [
    (ValueError("'no_such_key' not in 'emb_dim', 'mlp_dim'"),
     "unknown MaxText config key 'no_such_key'"),
    (ValidationError("1 validation error for MaxTextConfig\nsteps\n  Input should be a valid "
                     "integer"), "MaxText config key steps: Input should be a valid integer"),
    # MaxText 0.2.5's own text for eval_interval > 0 without eval files (a rule over keys)
    (ValidationError(
        "1 validation error for MaxTextConfig\n  Value error, Please specify grain_eval_files, "
        "use hf_path with grain_file_type=parquet, or use dataset_path, eval_dataset_name, and "
        "eval_split with grain_file_type=tfrecord; otherwise set eval_interval to <=0. "
        "[type=value_error, input_value={'run_name': ''}, input_type=dict]\n    For further "
        "information visit https://errors.pydantic.dev/2.14/v/value_error"),
     "MaxText config: Please specify grain_eval_files, use hf_path with grain_file_type=parquet, "
     "or use dataset_path, eval_dataset_name, and eval_split with grain_file_type=tfrecord; "
     "otherwise set eval_interval to <=0."),
    (FileNotFoundError("No files found matching pattern: /d/*.ar"),
     "MaxText's data files: No files found matching pattern: /d/*.ar"),
    (ValueError("Failed to load sentencepiece tokenizer from /t.model: NOT_FOUND"),
     "MaxText's tokenizer_path: Failed to load sentencepiece tokenizer from /t.model"),
])
def test_maxtext_errors_become_one_line(error: BaseException, expected: str) -> None:
    message = str(maxtext.maxtext_error(error, "config"))
    assert expected in message and "\n" not in message and "[type=" not in message


def test_maxtext_overrides_need_the_maxtext_option() -> None:
    result = CliRunner().invoke(main_command(), ["synthetic", "steps=10"])
    assert result.exit_code == 2
    assert "give them after --maxtext CONFIG.yml" in result.output


def main_command() -> click.Command:
    return cli


def test_maxtext_and_config_are_refused_together(tmp_path) -> None:
    (tmp_path / "a.yml").write_text("workload: demo\n")
    (tmp_path / "m.yml").write_text("steps: 1\n")
    result = CliRunner().invoke(main_command(), ["synthetic", "--config", str(tmp_path / "a.yml"),
                                                 "--maxtext", str(tmp_path / "m.yml")])
    assert result.exit_code == 2 and "--maxtext and --config" in result.output
