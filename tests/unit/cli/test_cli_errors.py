"""Bad input: one line on stderr, non-zero exit, no traceback (in-process, before JAX runs)."""

import json

import pytest

from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.records.common import CompileInfo, Distribution, StepRecord, Throughput
from pipecheck.records.synthetic import SyntheticResult


def one_line_error(capsys, argv, code):
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("pipecheck: error: ")
    assert "\n" not in err and "Traceback" not in err
    return err


def test_steps_zero(capsys):
    err = one_line_error(capsys, ["synthetic", "--steps", "0"], 2)
    assert "--steps" in err and "0 is not in the range" in err


def test_unknown_config_key(capsys):
    err = one_line_error(capsys, ["synthetic", "--set", "workload=calibrated",
                                  "--set", "compute=60"], 2)
    assert "unknown config key 'compute'" in err and "compute_ms" in err


def test_bad_value(capsys):
    err = one_line_error(capsys, ["synthetic", "--set", "workload=calibrated",
                                  "--set", "compute_ms=fast"], 2)
    assert "compute_ms must be a number" in err


def test_missing_config_file(capsys):
    err = one_line_error(capsys, ["synthetic", "--config", "/nonexistent/x.yml"], 2)
    assert "does not exist" in err


def test_missing_entry_point(capsys, tmp_path):
    cfg = tmp_path / "user.yml"
    cfg.write_text("workload:\n  init: nosuchmodule_xyz:init\n  train_step: nosuchmodule_xyz:step\n"
                   "  batch: nosuchmodule_xyz:batch\n")
    err = one_line_error(capsys, ["synthetic", "--config", str(cfg)], 2)
    assert "cannot import 'nosuchmodule_xyz'" in err


def test_entry_point_without_function(capsys, tmp_path):
    mod = tmp_path / "mywl.py"
    mod.write_text("def init(config):\n    return {}\n")
    cfg = tmp_path / "user.yml"
    cfg.write_text(f"workload:\n  init: {mod}:init\n  train_step: {mod}:step\n"
                   f"  batch: {mod}:init\n")
    err = one_line_error(capsys, ["synthetic", "--config", str(cfg)], 2)
    assert "has no attribute 'step'" in err


def test_a_pre_release_result_file_is_refused(capsys, tmp_path):
    record = SyntheticResult(env={}, config={}, step_time=Distribution.of([0.05, 0.06]),
                             compile=CompileInfo(1.2, 1.0, 1), throughput=Throughput(600.0),
                             steps=(StepRecord(0, 1.2, ("compile",), {}, 3.5),
                                    StepRecord(1, 0.05, (), {}, 3.4)))
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    store.save(record, new)
    old.write_text(json.dumps({**record.to_dict(), "format_version": 3}))
    err = one_line_error(capsys, ["diff", str(old), str(new)], 2)
    assert err == (f"pipecheck: error: {old} has format_version 3; this pipecheck reads "
                   "versions 4 to 6 (re-run the measurement with this version, or upgrade "
                   "pipecheck)")


def test_existing_output_refused_before_running(capsys, tmp_path):
    out = tmp_path / "r.json"
    out.write_text("{}")
    err = one_line_error(capsys, ["synthetic", "--json", str(out)], 2)
    assert "exists; pass --force" in err
    assert out.read_text() == "{}"


HELP_MUST_NAME = {
    (): ("compare", "synthetic", "dataloader", "diff", "import", "plot", "--traceback",
         "--version"),
    ("synthetic",): ("--config", "--set", "--steps", "--json", "--force", "--trace"),
    ("dataloader",): ("--config", "--set", "--workers", "--threads", "--batches",
                      "--no-device-put", "--timeout", "--json", "--force"),
    ("compare",): ("--config", "--set", "--steps", "--real", "--json", "--force"),
    ("diff",): ("--json", "--force"),
    ("import",): ("--json", "--force"),
    ("plot",): ("-o", "--window", "--force"),
}
"""What each --help must mention: every command at the top, every option of a command."""


@pytest.mark.parametrize("command", list(HELP_MUST_NAME))
def test_help_explains_every_option(capsys, command):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Usage: pipecheck {' '.join(command)}".rstrip() + " ")
    missing = [name for name in HELP_MUST_NAME[command] if name not in out]
    assert missing == [], out


def test_profile_folder_without_capture(capsys, tmp_path):
    err = one_line_error(capsys, ["profile", str(tmp_path)], 2)
    assert "holds no profiler capture" in err and "jax.profiler.start_trace" in err


def test_profile_not_a_capture(capsys, tmp_path):
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(b"this is not a protobuf of an XSpace \x00\xff" * 10)
    err = one_line_error(capsys, ["profile", str(bad)], 2)
    assert "cannot be read as a profiler capture" in err


LONG_COMMANDS = ("synthetic", "dataloader", "compare", "diff", "import", "plot", "profile")


@pytest.mark.parametrize("command", LONG_COMMANDS)
def test_every_long_command_accepts_quiet(capsys, command):
    from pipecheck.cli import main

    assert main([command, "--help"]) == 0
    assert "--quiet" in capsys.readouterr().out


def test_progress_lines_go_to_stderr_the_same_way_and_quiet_silences_them(capsys):
    from pipecheck.cli.progress import command_progress
    from pipecheck.progress import NO_PROGRESS

    command_progress(False).say("[1/4] target step time: 30 synthetic steps")
    assert capsys.readouterr().err == "pipecheck: [1/4] target step time: 30 synthetic steps\n"
    assert command_progress(True) is NO_PROGRESS


def test_progress_off_a_terminal_draws_no_bar_and_loads_no_tqdm():
    """Off a terminal (a pipe, CI, a benchmark) tqdm would draw nothing: its import (~0.03
    s) is not paid either. On a terminal the bar is drawn (tests/integration/
    test_long_runs_cli.py, under a pseudo-terminal)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from pipecheck.cli.progress import command_progress\n"
            "with command_progress(False).task('reading a.log', 10, 'B') as task:\n"
            "    task.advance(10)\n"
            "print('tqdm' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False" and out.stderr == ""
