"""``pipecheck profile``: the verdict from a jax.profiler capture."""

from __future__ import annotations

import click

from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.options import check_outputs, output_options, quiet_option, save_json
from pipecheck.cli.progress import command_progress
from pipecheck.profiling import ProfileOptions, profile_capture
from pipecheck.report.profile import format_profile


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=click.Path(exists=True))
@click.option("--run", "run", metavar="NAME",
              help="The capture run (a plugins/profile/<NAME> folder). Default: the newest.")
@click.option("--step-fn", "step_fn", metavar="NAME",
              help="The jitted train step's name: its executions delimit the steps (for "
                   "captures without StepTraceAnnotation markers; without it the function "
                   "that clearly repeats is picked, else the whole capture is read).")
@click.option("--source", "source_dirs", multiple=True, type=click.Path(file_okay=False),
              help="A folder holding your training script, to name the line of a sync "
                   "(repeatable; the current folder is always searched).")
@click.option("--xprof", "xprof", is_flag=True,
              help="Also print XProf's own input-pipeline conclusion and step-time breakdown "
                   "for the capture (needs pip install 'pipecheck[xprof]').")
@output_options
@quiet_option
def profile(path: str, run: str | None, step_fn: str | None, source_dirs: tuple[str, ...],
            xprof: bool, json_path: str | None, force: bool, quiet: bool) -> None:
    """The verdict from a jax.profiler capture: compute-bound, input-bound, forced-sync or
    host-bound (dispatch), with where each step's time went on the device and what the
    training thread did while the device sat idle.

    PATH is the folder given to jax.profiler.start_trace (or any folder above a
    plugins/profile/<run>/ folder), or one .xplane.pb or .trace.json.gz file. See docs/profile.md.
    """
    check_outputs(force, json_path)
    result = profile_capture(ProfileOptions(path, run, step_fn, source_dirs, xprof),
                             command_progress(quiet))
    click.echo(format_profile(result))
    save_json(result, json_path, force)
