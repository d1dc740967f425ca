"""One name per option across the commands (docs/config.md, "One name per option"): each
renamed option works under its new name, still works under its old one with a one-line
notice on stderr (exit code unchanged), and --help shows the new name only."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipecheck.cli import cli
from pipecheck.cli import plot as cli_plot
from pipecheck.cli.option_specs import notice

DATA = Path(__file__).parents[2] / "data"
DATALOADER = str(DATA / "whatif" / "dataloader_calibrated_load20_cpu3.json")
SYNTHETIC = str(DATA / "records_v4" / "synthetic.json")

RENAMED = [
    # command, leading arguments, old spelling, new spelling, value, parameter, parsed value
    ("whatif", [DATALOADER], "--buffer", "--per-worker-buffer-size", "3",
     "per_worker_buffer", 3),
    ("whatif", [DATALOADER], "--prefetch", "--prefetch-buffer-size", "4", "prefetch", 4),
    ("dataloader", [], "--steps", "--run-steps", "500", "run_steps", 500),
    ("plot", [SYNTHETIC, "-o", "p.png"], "--steps", "--window", "3:40", "window", "3:40"),
]
IDS = [f"{c[0]} {c[2]}" for c in RENAMED]
WIDTH = 80


def invoke(args: list[str]):
    return CliRunner().invoke(cli, args, prog_name="pipecheck", terminal_width=WIDTH)


def parsed(command: str, args: list[str]) -> dict[str, object]:
    """The command's parameters as click parses ``args`` (nothing runs)."""
    ctx = cli.commands[command].make_context(command, list(args))
    return dict(ctx.params)


def flags(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]*", text))


@pytest.mark.parametrize("command, lead, old, new, value, name, expected", RENAMED, ids=IDS)
def test_the_new_spelling_sets_the_option_and_says_nothing(command, lead, old, new, value,
                                                          name, expected, capsys):
    assert parsed(command, [*lead, new, value])[name] == expected
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command, lead, old, new, value, name, expected", RENAMED, ids=IDS)
def test_the_old_spelling_still_works_and_names_the_new(command, lead, old, new, value, name,
                                                        expected, capsys):
    assert parsed(command, [*lead, old, value])[name] == expected
    assert parsed(command, [*lead, f"{old}={value}"])[name] == expected
    assert capsys.readouterr().err == (
        f"pipecheck: {old} is now {new}; the old spelling still works\n" * 2)


@pytest.mark.parametrize("command, lead, old, new, value, name, expected", RENAMED, ids=IDS)
def test_help_shows_the_new_spelling_only(command, lead, old, new, value, name, expected):
    result = invoke([command, "--help"])
    assert result.exit_code == 0
    assert new in flags(result.output) and old not in flags(result.output), result.output


@pytest.mark.parametrize("command, lead, old, new, value, name, expected", RENAMED, ids=IDS)
def test_both_spellings_at_once_are_a_usage_error(command, lead, old, new, value, name,
                                                  expected):
    result = invoke([command, *lead, old, value, new, value])
    assert result.exit_code == 2
    assert f"{old} is the old spelling of {new}; give {new} once" in result.stderr


def test_notice_text():
    assert notice("--buffer", "--per-worker-buffer-size") == (
        "pipecheck: --buffer is now --per-worker-buffer-size; the old spelling still works")


def test_whatif_gives_the_same_prediction_under_either_spelling():
    new = invoke(["whatif", DATALOADER, "--workers", "3", "--per-worker-buffer-size", "3",
                  "--prefetch-buffer-size", "4"])
    old = invoke(["whatif", DATALOADER, "--workers", "3", "--buffer", "3", "--prefetch", "4"])
    assert new.exit_code == old.exit_code == 0, old.output
    assert new.stdout == old.stdout
    assert "workers=3, buffer=3, threads=4, prefetch=4" in new.stdout
    assert new.stderr == ""
    assert old.stderr.splitlines() == [notice("--buffer", "--per-worker-buffer-size"),
                                       notice("--prefetch", "--prefetch-buffer-size")]


def test_a_bad_value_under_the_old_spelling_keeps_its_exit_code():
    new = invoke(["whatif", DATALOADER, "--per-worker-buffer-size", "0"])
    old = invoke(["whatif", DATALOADER, "--buffer", "0"])
    assert new.exit_code == old.exit_code == 2
    assert old.stderr.splitlines()[0] == notice("--buffer", "--per-worker-buffer-size")
    assert old.stderr.splitlines()[1:] == new.stderr.splitlines()


@pytest.mark.parametrize("spelling", ["--window", "--steps"])
def test_plots_window_under_either_spelling(spelling, monkeypatch, tmp_path):
    """``plot --steps 3:40`` (its old spelling) still draws the window of steps 3 to 40."""
    asked: list = []

    def plot_run(run_json, output, window, force, progress):
        asked.append(window)
        return types.SimpleNamespace(ended_early=None, window=window, lower="gantt",
                                     banded=False)

    monkeypatch.setattr(cli_plot, "plot_run", plot_run)
    out = tmp_path / "p.png"
    result = invoke(["plot", SYNTHETIC, "-o", str(out), spelling, "3:40"])
    assert result.exit_code == 0, result.output
    assert asked == [(3, 40)]
    assert result.stdout == f"wrote {out} (Gantt of steps 3-40)\n"
    expected = "" if spelling == "--window" else notice("--steps", "--window") + "\n"
    assert result.stderr == expected


def test_plots_bad_window_names_the_new_option():
    result = invoke(["plot", SYNTHETIC, "-o", "p.png", "--steps", "9:3"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == notice("--steps", "--window")
    assert "Invalid value for '--window': expected FIRST:LAST" in result.stderr
