"""Saved Grain settings: written as a config, read back by --config and grain_options."""

import subprocess
import sys

import grain
import pytest
import yaml

from pipecheck import grain_options
from pipecheck.config import read_config_file
from pipecheck.errors import ConfigError, OutputExistsError
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.tuned_config import (
    config_settings,
    machine_differences,
    machine_warning,
    save_config,
    this_machine,
)
from pipecheck.workloads import resolve


def _cfg(**values):
    return resolve({"workload": "calibrated", **values}, source="test")


def test_saved_config_is_read_back_by_config_with_its_settings(tmp_path):
    path = tmp_path / "tuned.yml"
    cfg = _cfg(load_ms=40)
    save_config(str(path), cfg, GrainSettings(3, 1, 4, 4), {"loader_s": 0.012})
    again = resolve(read_config_file(path), source=str(path))
    assert again["load_ms"] == 40 and again.workload == "calibrated"
    assert config_settings(again) == GrainSettings(3, 1, 4, 4)
    assert again.measured_on["loader_s"] == 0.012
    assert again.measured_on["cpu_count"] == this_machine()["cpu_count"]
    assert machine_warning(again.measured_on, str(path)) is None  # same machine
    assert "measured_on" not in again.to_dict()  # not a key: results compare configs


def test_grain_options_returns_grain_option_objects(tmp_path):
    path = tmp_path / "tuned.yml"
    save_config(str(path), _cfg(), GrainSettings(2, 3, 8, 16), {})
    mp, read = grain_options(str(path))
    assert isinstance(mp, grain.MultiprocessingOptions)
    assert isinstance(read, grain.ReadOptions)
    assert (mp.num_workers, mp.per_worker_buffer_size) == (2, 3)
    assert (read.num_threads, read.prefetch_buffer_size) == (8, 16)


def test_another_machine_warns_in_grain_options_and_names_the_differences(tmp_path):
    path = tmp_path / "tuned.yml"
    save_config(str(path), _cfg(), GrainSettings(2), {})
    data = yaml.safe_load(path.read_text())
    data["measured_on"].update(cpu_count=64, ram_mb=10 * data["measured_on"]["ram_mb"])
    path.write_text(yaml.safe_dump(data))
    with pytest.warns(UserWarning, match="tuned on another machine") as rec:
        grain_options(str(path))
    msg = str(rec[0].message)
    assert "cpu_count 64 there" in msg and "ram_mb" in msg


def test_ram_within_tolerance_is_the_same_machine():
    here = {"ram_mb": 16000, "cpu_count": 2}
    assert machine_differences({"ram_mb": 16100, "cpu_count": 2}, here) == []
    assert machine_differences({"ram_mb": 32000, "cpu_count": 2}, here) == \
        ["ram_mb 32000 there, 16000 here"]


def test_a_config_without_grain_settings_is_a_clear_error(tmp_path):
    path = tmp_path / "plain.yml"
    path.write_text("workload: calibrated\nload_ms: 5\n")
    with pytest.raises(ConfigError, match="holds no Grain settings .num_workers is missing.; "
                                          "write one with pipecheck dataloader --save-config"):
        grain_options(str(path))


def test_bad_values_in_a_saved_config_are_config_errors(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("workload: calibrated\nnum_workers: -1\n")
    with pytest.raises(ConfigError, match="num_workers must be >= 0, got -1"):
        grain_options(str(path))
    path.write_text("workload: calibrated\nnum_workers: 1\nmeasured_on: yes\n")
    with pytest.raises(ConfigError, match="measured_on in the config file must be a mapping"):
        resolve(read_config_file(path))


def test_save_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "tuned.yml"
    path.write_text("keep me")
    with pytest.raises(OutputExistsError):
        save_config(str(path), _cfg(), GrainSettings(1), {})
    assert path.read_text() == "keep me"
    save_config(str(path), _cfg(), GrainSettings(1), {}, force=True)
    assert "num_workers: 1" in path.read_text()


def test_user_code_loads_options_with_the_documented_lines(tmp_path):
    """The lines docs/tuning.md shows, run as a user script outside the repository."""
    path = tmp_path / "tuned.yml"
    save_config(str(path), _cfg(), GrainSettings(2, 1, 4, 8), {})
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\n"
        "import pipecheck\n"
        "assert 'grain' not in sys.modules and 'jax' not in sys.modules\n"
        f"mp_options, read_options = pipecheck.grain_options({str(path)!r})\n"
        "print(mp_options.num_workers, mp_options.per_worker_buffer_size,\n"
        "      read_options.num_threads, read_options.prefetch_buffer_size)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "1", "4", "8"]


def test_advice_names_only_the_knobs_that_differ_from_the_defaults():
    assert GrainSettings(4).advice() == \
        "4 Grain workers (grain.MultiprocessingOptions(num_workers=4))"
    assert GrainSettings(0, threads=4, prefetch=4).advice() == (
        "4 read threads in the training process and no Grain workers "
        "(grain.ReadOptions(num_threads=4, prefetch_buffer_size=4), no mp_prefetch)")
    assert GrainSettings(2, 1, 8).advice() == (
        "2 Grain workers with 8 read threads (grain.MultiprocessingOptions(num_workers=2, "
        "per_worker_buffer_size=1), grain.ReadOptions(num_threads=8, prefetch_buffer_size=16))")
