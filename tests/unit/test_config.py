import pytest

from pipecheck.config import parse_set_option, read_config_file
from pipecheck.errors import ConfigError
from pipecheck.workloads import resolve


def test_defaults_are_the_demo_workload():
    cfg = resolve()
    assert cfg.workload == "demo"
    assert cfg["batch_size"] == 8 and cfg["seq_len"] == 128


def test_file_then_set_overrides_win_and_are_typed():
    cfg = resolve({"workload": "calibrated", "compute_ms": 40},
                  ["compute_ms=60", "host_sync=every_step", "aot_sharding_mismatch=true",
                   "devices=4"])
    assert cfg.workload == "calibrated"
    assert cfg["compute_ms"] == 60.0 and isinstance(cfg["compute_ms"], float)
    assert cfg["host_sync"] == "every_step"
    assert cfg["aot_sharding_mismatch"] is True
    assert cfg["devices"] == 4
    assert cfg.to_dict()["workload"] == "calibrated"


def test_set_can_choose_the_workload():
    assert resolve(None, ["workload=calibrated", "load_ms=80"])["load_ms"] == 80.0


@pytest.mark.parametrize("overrides, message", [
    (["compute_ms=abc"], "compute_ms must be a number (float), got 'abc'"),
    (["computems=60"], "unknown config key 'computems' (in --set) for workload 'calibrated'"),
    (["host_sync=sometimes"], "host_sync must be one of none | every_step, got 'sometimes'"),
    (["batch_size=0"], "batch_size must be >= 1, got 0"),
    (["batch_size=2.5"], "batch_size must be a whole number, got 2.5"),
    (["aot_sharding_mismatch=maybe"], "aot_sharding_mismatch must be true or false"),
])
def test_bad_values_are_one_line_errors(overrides, message):
    with pytest.raises(ConfigError) as e:
        resolve({"workload": "calibrated"}, overrides)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_workload():
    with pytest.raises(ConfigError, match="unknown workload 'resnet'"):
        resolve({"workload": "resnet"})


def test_set_needs_key_equals_value():
    with pytest.raises(ConfigError, match="--set expects key=value"):
        parse_set_option("compute_ms")


def test_user_workload_entry_points_are_kept(tmp_path):
    cfg = resolve({"workload": {"init": "m:init", "train_step": "m:step"}, "batch_size": 4})
    assert cfg.workload == "user"
    assert cfg.entry_points == {"init": "m:init", "train_step": "m:step"}
    assert cfg.to_dict()["workload"] == {"init": "m:init", "train_step": "m:step"}


def test_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_config_file(tmp_path / "nope.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("workload: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        read_config_file(bad)
    lst = tmp_path / "list.yml"
    lst.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        read_config_file(lst)


def test_shipped_configs_load(tmp_path):
    import pathlib

    for path in sorted(pathlib.Path(__file__).parents[2].joinpath("configs").glob("*.yml")):
        cfg = resolve(read_config_file(path))
        assert cfg.workload in ("demo", "calibrated", "user")
