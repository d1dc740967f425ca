"""The ``pipecheck`` click group; each command module adds its command to it."""

from __future__ import annotations

import click

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="pipecheck", prog_name="pipecheck")
@click.option("--traceback", is_flag=True, expose_value=False,
              help="On an error, print the full stack before the one-line message (also "
                   "accepted after the command, e.g. pipecheck synthetic --traceback).")
def cli() -> None:
    """Is this JAX training run held back by its input pipeline, by compute, or by the
    host forcing a sync with the device?

    \b
    pipecheck synthetic    target step time: train on a batch already on the devices
    pipecheck dataloader   the Grain input pipeline alone, per worker count
    pipecheck compare      both, tuned workers, real-data training and a verdict
    pipecheck diff A B     two runs side by side (pipecheck JSON or MaxText logs)
    pipecheck import LOG   a MaxText training log as a pipecheck record
    pipecheck plot RUN     step times with tagged steps, and a Gantt of a window
    pipecheck profile DIR  the verdict from a jax.profiler capture (device busy, idle)
    pipecheck report RUN   one self-contained HTML page for one or more records
    pipecheck watch RUN    a running Monitor's record, live: steps/s, input wait, stalls
    pipecheck whatif RUN   a loader setting's D and step time, predicted from a run

    Workloads are chosen with --config (YAML) and --set key=value; without them the
    built-in demo transformer runs. Every command can write a versioned JSON result.
    """
