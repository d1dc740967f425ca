"""compare's options, declared once (cli/compare.COMPARE_OPTIONS): what a file given instead
refuses, what the processes of a run agree on, and the CompareOptions the command builds."""

from __future__ import annotations

import dataclasses

import pytest
from click.core import ParameterSource

from pipecheck.cli import compare as cli_compare
from pipecheck.cli import main
from pipecheck.compare import CompareOptions
from pipecheck.measure.distributed import fingerprint

REPLACED = {"--steps": ("--real", "10"), "--target-steps": ("--synthetic", "10"),
            "--batches": ("--dataloader", "5"), "--workers": ("--dataloader", "4"),
            "--threads": ("--dataloader", "2"), "--max-workers": ("--dataloader", "4"),
            "--ram-budget-mb": ("--dataloader", "100"), "--search": ("--dataloader", "model"),
            "--profile": ("--real", "cap"), "--measure-gain": ("--real", None),
            "--no-measure-gain": ("--real", None)}
"""Each option a file replaces: the file's option, and a value for it (None: a switch)."""


def parsed(*args: str) -> tuple[dict[str, bool], dict[str, object]]:
    """compare's command line parsed as click does: whether each option was given, and
    each value."""
    ctx = cli_compare.compare.make_context("compare", list(args))
    given = {name: ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE
             for name in ctx.params}
    return given, ctx.params


def test_the_table_names_each_option_a_file_replaces():
    assert {s.switch: s.replaced_by.replace("_file", "") for s in cli_compare.COMPARE_OPTIONS
            if s.replaced_by} == {flag: file[2:] for flag, (file, _) in REPLACED.items()
                                  if not flag.startswith("--no-")}


@pytest.mark.parametrize("flag", sorted(REPLACED))
def test_an_option_for_a_measurement_a_file_replaces_is_refused(flag, tmp_path, capsys):
    file_option, value = REPLACED[flag]
    run = tmp_path / "run.json"
    run.write_text("{}")
    assert main(["compare", file_option, str(run), flag, *([value] if value else []),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{flag} cannot be used with the file that replaces that measurement " \
           "(--synthetic, --dataloader, --real)" in err, err


def test_trace_needs_pipechecks_own_real_data_run(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text("{}")
    assert main(["compare", "--real", str(run), "--trace", str(tmp_path / "t.json")]) == 2
    assert "--trace needs pipecheck's own real-data run" in capsys.readouterr().err


def test_the_processes_agree_on_the_options_given_and_the_files():
    given, values = parsed("--steps", "12", "--workers", "2,4")
    agreed = cli_compare.agreed_values(cli_compare.COMPARE_OPTIONS, given, values)
    assert agreed == {"steps": 12, "target_steps": None, "batches": None, "workers": (2, 4),
                      "threads": None, "max_workers": None, "ram_budget_mb": None,
                      "search": None, "cold": None, "measure_gain": None, "synthetic": None,
                      "dataloader": None, "real": None}
    assert [k for k in fingerprint("compare", {}, agreed) if k != "command"] == [
        "--steps", "--target-steps", "--batches", "--workers", "--threads", "--max-workers",
        "--ram-budget-mb", "--search", "--cold", "--measure-gain", "--synthetic", "--dataloader",
        "--real"]


def test_the_defaults_are_compares_and_each_option_sets_its_field():
    assert cli_compare._compare_options(*parsed()) == CompareOptions()
    given, values = parsed("--workers", "4,2,4", "--threads", "3", "--max-workers", "6",
                           "--timeout", "0", "--ram-budget-mb", "512", "--steps", "9")
    assert cli_compare._compare_options(given, values) == dataclasses.replace(
        CompareOptions(), workers=(4, 2), threads=3, search_threads=False, max_workers=6,
        max_workers_given=True, timeout_s=0.0, ram_budget_mb=512.0, steps=9)
