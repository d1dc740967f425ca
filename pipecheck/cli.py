"""The ``pipecheck`` command: parse, build a config, call the core, print a report.

Only this module prints. Every ``PipecheckError`` and every click usage error
becomes one line on stderr and a non-zero exit code, in ``main``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import click

from pipecheck import config as config_mod
from pipecheck import results
from pipecheck.errors import PipecheckError

EXIT_INTERRUPTED = 130

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def config_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--config PATH and repeated --set key=value."""
    f = click.option(
        "--set", "overrides", metavar="KEY=VALUE", multiple=True,
        help="Override one config key, e.g. --set compute_ms=60 (repeatable). Keys are flat "
             "and named exactly as in docs/config.md.",
    )(f)
    f = click.option(
        "--config", "config_path", type=click.Path(exists=True, dir_okay=False),
        help="YAML config selecting a workload and its keys (e.g. configs/calibrated.yml). "
             "Default: the built-in demo workload.",
    )(f)
    return f


def output_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--json PATH and --force."""
    f = click.option("--force", is_flag=True,
                     help="Overwrite the --json (and --trace) output files if they exist.")(f)
    f = click.option("--json", "json_path", type=click.Path(dir_okay=False),
                     help="Write the versioned result record to this JSON file (atomically).")(f)
    return f


def _distinct_outputs(*paths: str | None) -> None:
    import os

    given = [os.path.abspath(p) for p in paths if p]
    if len(set(given)) != len(given):
        raise click.UsageError("--json and --trace name the same file; give them different paths")


def load_config(config_path: str | None, overrides: Sequence[str]) -> config_mod.RunConfig:
    file_values = config_mod.read_config_file(config_path) if config_path else None
    return config_mod.resolve(file_values, overrides, source=config_path or "defaults")


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="pipecheck", prog_name="pipecheck")
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

    Workloads are chosen with --config (YAML) and --set key=value; without them the
    built-in demo transformer runs. Every command can write a versioned JSON result.
    """


@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@click.option("--steps", type=click.IntRange(min=3), default=None,
              help="Training steps to time, the first (compile) and the last (drain) step "
                   "included; at least 3. [default: 40]")
@output_options
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON of the run (open in ui.perfetto.dev or "
                   "chrome://tracing; gzip when the name ends in .gz). See docs/timeline.md.")
def synthetic(config_path: str | None, overrides: tuple[str, ...], steps: int | None,
              json_path: str | None, force: bool, trace_path: str | None) -> None:
    """Measure the target step time: train on one batch that already sits on the devices.

    Step time is the interval between consecutive host syncs on the *previous* step's
    loss, so asynchronous dispatch cannot hide compute. The first step and any step that
    compiled are reported apart from the steady state (median, p10, p90, IQR); every
    compilation of the train step after the first is explained.
    """
    from pipecheck.report import format_synthetic
    from pipecheck.synthetic import DEFAULT_STEPS, synthetic_run

    cfg = load_config(config_path, overrides)
    results.check_writable(json_path, force)
    results.check_writable(trace_path, force)
    _distinct_outputs(json_path, trace_path)
    run = synthetic_run(cfg, steps or DEFAULT_STEPS)
    result = run.result
    click.echo(format_synthetic(result))
    if json_path:
        results.save(result, json_path, force)
        click.echo(f"\nwrote {json_path}")
    if trace_path:
        from pipecheck.trace import write_recorder_trace

        write_recorder_trace(trace_path, run.recorder, run.compile_events,
                             "pipecheck synthetic", force)
        click.echo(f"wrote {trace_path} (open in ui.perfetto.dev)")


# --- dataloader command (issue 3) -------------------------------------------------------
def _int_list(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    """Parse ``0,1,2,4`` into distinct non-negative ints, in order."""
    out: list[int] = []
    for item in value.split(","):
        item = item.strip()
        if not item.isdigit():
            raise click.BadParameter(
                f"expected a number or a comma-separated list like 0,1,2,4, got {value!r}")
        if int(item) not in out:
            out.append(int(item))
    return out


@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@click.option("--workers", default="0", show_default=True, callback=_int_list,
              metavar="N[,N...]",
              help="Grain worker processes (mp_prefetch); a comma-separated list sweeps them, "
                   "e.g. --workers 0,1,2,4. 0 loads in the main process, as a training loop "
                   "without workers does.")
@click.option("--threads", default="1", show_default=True, callback=_int_list,
              metavar="N[,N...]",
              help="Read threads per process (ReadOptions.num_threads); a list sweeps them.")
@click.option("--batches", type=click.IntRange(min=1), default=50, show_default=True,
              help="Batches to time after the first (the first batch is reported apart).")
@click.option("--no-device-put", "no_device_put", is_flag=True,
              help="Do not move each batch to the devices (by default it is put with the "
                   "workload's sharding, as training does: that host work is loading cost).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=120.0,
              show_default=True, metavar="SECONDS",
              help="Stop with an error when the pipeline produces no batch for this long "
                   "(0: wait forever).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON: one track per setting, one slice per "
                   "batch (open in ui.perfetto.dev or chrome://tracing).")
@output_options
def dataloader(config_path: str | None, overrides: tuple[str, ...], workers: list[int],
               threads: list[int], batches: int, no_device_put: bool, timeout_s: float,
               trace_path: str | None, json_path: str | None, force: bool) -> None:
    """Time the Grain input pipeline alone, per worker count (and read-thread count).

    For each setting: the first batch (iterator creation, worker spawn) apart; then the
    median, p90 and p99 of the per-batch times, batches/s, examples/s and tokens/s without
    the first batch; and Grain's per-stage breakdown, naming the stage the pipeline waits on.
    """

    from pipecheck.dataloader import measure_dataloader
    from pipecheck.report_dataloader import format_dataloader

    cfg = load_config(config_path, overrides)
    results.check_writable(json_path, force)
    results.check_writable(trace_path, force)
    _distinct_outputs(json_path, trace_path)
    try:
        result = measure_dataloader(
            cfg, workers, threads, batches, device_put=not no_device_put,
            timeout_s=timeout_s or None,
            progress=lambda line: click.echo(f"pipecheck: {line}", err=True),
        )
    except KeyboardInterrupt:
        raise click.exceptions.Abort() from None  # main() prints the one-line message
    click.echo(format_dataloader(result))
    if json_path:
        results.save(result, json_path, force)
        click.echo(f"\nwrote {json_path}")
    if trace_path:
        from pipecheck.trace import dataloader_trace, write_trace

        write_trace(trace_path, dataloader_trace(result), force)
        click.echo(f"wrote {trace_path} (open in ui.perfetto.dev)")


# --- end dataloader command --------------------------------------------------------------


# --- compare command (issue 4) -----------------------------------------------------------
@cli.command(context_settings=CONTEXT_SETTINGS)
@config_options
@click.option("--steps", type=click.IntRange(min=5), default=None,
              help="Real-data training steps to time. [default: 60]")
@click.option("--target-steps", type=click.IntRange(min=5), default=None,
              help="Synthetic steps for the target step time T. [default: 30]")
@click.option("--batches", type=click.IntRange(min=3), default=None,
              help="Batches timed per loader setting, after the first. [default: 30]")
@click.option("--workers", "workers_opt", metavar="N[,N...]", default=None,
              callback=lambda ctx, param, value: None if value is None
              else _int_list(ctx, param, value),
              help="Fix the Grain worker count, or give a list to choose from, instead of "
                   "searching.")
@click.option("--threads", type=click.IntRange(min=0), default=None,
              help="Grain read threads per worker (ReadOptions.num_threads). [default: 1]")
@click.option("--max-workers", type=click.IntRange(min=1), default=None,
              help="Ceiling of the worker search; above the core count by default because "
                   "latency-bound pipelines keep gaining past the cores. "
                   "[default: max(8, 2 x cores)]")
@click.option("--synthetic", "synthetic_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the target step time from this `pipecheck synthetic --json` file.")
@click.option("--dataloader", "dataloader_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the loader settings from this `pipecheck dataloader --json` file.")
@click.option("--real", "real_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the real-data step times and sync sites from a pipecheck.Monitor run "
                   "of your own loop (RUN.json).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None,
              metavar="SECONDS", help="Stop if the pipeline produces no batch for this many "
                                      "seconds (0: wait forever). [default: 120]")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Write a Chrome trace event JSON of the real-data run (open in "
                   "ui.perfetto.dev or chrome://tracing).")
@output_options
def compare(config_path: str | None, overrides: tuple[str, ...], steps: int | None,
            target_steps: int | None, batches: int | None, workers_opt: list[int] | None,
            threads: int | None, max_workers: int | None, synthetic_file: str | None,
            dataloader_file: str | None, real_file: str | None, timeout_s: float | None,
            quiet: bool, trace_path: str | None, json_path: str | None, force: bool) -> None:
    """Is the run input-bound, compute-bound, or held back by a forced host sync?

    Measures the target step time T (as `synthetic`), searches the Grain worker count for
    a loader time D below T (as `dataloader`), trains on real data with the chosen setting
    (R, with a sampler locating the line that syncs), measures T again to catch machine
    drift, and gives the verdict with the evidence and a recommendation.
    """
    from pipecheck import compare as compare_mod
    from pipecheck.report_compare import format_compare

    cfg = load_config(config_path, overrides)
    results.check_writable(json_path, force)
    results.check_writable(trace_path, force)
    _distinct_outputs(json_path, trace_path)
    ignored = [opt for opt, value, source in (
        ("--workers", workers_opt, dataloader_file), ("--max-workers", max_workers,
                                                      dataloader_file),
        ("--batches", batches, dataloader_file), ("--threads", threads, dataloader_file),
        ("--target-steps", target_steps, synthetic_file), ("--steps", steps, real_file))
        if value is not None and source]
    if ignored:
        raise click.UsageError(f"{', '.join(ignored)} cannot be used with the file that "
                               "replaces that measurement (--dataloader, --synthetic, --real)")
    if trace_path and real_file:
        raise click.UsageError("--trace needs pipecheck's own real-data run; a Monitor run "
                               "writes its trace with mon.write_trace(PATH)")

    def progress(msg: str) -> None:
        if not quiet:
            click.echo(msg, err=True)

    run = compare_mod.compare_run(
        cfg,
        steps=steps or compare_mod.DEFAULT_STEPS,
        target_steps=target_steps or compare_mod.DEFAULT_TARGET_STEPS,
        batches=batches or compare_mod.DEFAULT_BATCHES,
        workers=workers_opt, threads=threads,
        max_workers=max_workers or compare_mod.DEFAULT_MAX_WORKERS,
        synthetic_file=synthetic_file, dataloader_file=dataloader_file, real_file=real_file,
        timeout_s=timeout_s, progress=progress,
    )
    result = run.result
    click.echo(format_compare(result))
    if json_path:
        results.save(result, json_path, force)
        click.echo(f"\nwrote {json_path}")
    if trace_path and run.real.recorder is not None:
        from pipecheck.trace import write_recorder_trace

        write_recorder_trace(trace_path, run.real.recorder, run.real.compile_events,
                             process_name="pipecheck compare (real-data run)", force=force)
        click.echo(f"wrote {trace_path} (open in ui.perfetto.dev)")
# --- end compare command -----------------------------------------------------------------


# --- plot command (issue 5) --------------------------------------------------------------
def _parse_window(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    first, sep, last = value.partition(":")
    try:
        a, b = int(first), int(last)
    except ValueError:
        a, b = -1, -1
    if not sep or a < 0 or b < a:
        raise click.BadParameter(f"expected FIRST:LAST step numbers (e.g. 10:21), got {value!r}",
                                 param_hint="--steps")
    return a, b


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("run_json", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="PNG file to write (atomically).")
@click.option("--steps", "window", metavar="FIRST:LAST",
              help="Steps shown in the Gantt (inclusive). Default: 12 steps around the first "
                   "checkpoint/eval/gc step.")
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def plot(run_json: str, output: str, window: str | None, force: bool) -> None:
    """Plot a run JSON (synthetic, monitor, compare ...): the step-time series with tagged
    steps marked, and a Gantt of a window of steps. Needs matplotlib
    (pip install 'pipecheck[plot]'). See docs/timeline.md.
    """
    from pipecheck.plot import plot_run

    shown = plot_run(run_json, output, _parse_window(window), force)
    click.echo(f"wrote {output} (Gantt of steps {shown[0]}-{shown[1]})")


# --- end plot command --------------------------------------------------------------------


# --- diff and import commands (issue 6) --------------------------------------------------
@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("a", type=click.Path(exists=True, dir_okay=False))
@click.argument("b", type=click.Path(exists=True, dir_okay=False))
@output_options
def diff(a: str, b: str, json_path: str | None, force: bool) -> None:
    """Compare run B with run A side by side.

    A and B are pipecheck result JSON files or MaxText training logs, in any mix, told
    apart by their content. Step times are compared over the steady state (no compile
    step, no anomalies): median, p90 and mean, with B-A, the relative change, and whether
    the median moved significantly (block-bootstrap interval of the median difference
    and Mann-Whitney U must both agree). Anomalous steps are listed with a likely cause.
    """
    from pipecheck.diff import diff_runs, load_run
    from pipecheck.report_diff import format_diff

    results.check_writable(json_path, force)
    result = diff_runs(load_run(a), load_run(b))
    click.echo(format_diff(result))
    if json_path:
        results.save(result, json_path, force)
        click.echo(f"\nwrote {json_path}")


@cli.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@output_options
def import_log_command(log: str, json_path: str | None, force: bool) -> None:
    """Read a MaxText training log: steps, steady state, anomalies and their causes.

    Lines that matter (completed steps, parameters, versions, memory, checkpoint events,
    Total TFLOPs) are found even with glog headers and interleaved lines from other
    threads; all other lines are ignored. --json writes an "imported" record that
    'pipecheck diff' also accepts.
    """
    from pipecheck.maxtext import import_log
    from pipecheck.report_diff import format_imported

    results.check_writable(json_path, force)
    run = import_log(log)
    click.echo(format_imported(run))
    if json_path:
        results.save(run, json_path, force)
        click.echo(f"\nwrote {json_path}")


# --- end diff and import commands --------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _exit_past_stuck_threads(code: int) -> None:
    """After a stall, a transform stuck in a read thread would hold the interpreter's exit
    forever (it joins such threads): run multiprocessing's exit clean-up and leave now."""
    import multiprocessing.util
    import os
    import threading

    stuck = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not stuck:
        return
    multiprocessing.util._exit_function()  # type: ignore[attr-defined]
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code instead of raising."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="pipecheck",
                 standalone_mode=False)
    except PipecheckError as e:
        click.echo(f"pipecheck: error: {_one_line(str(e))}", err=True)
        from pipecheck.pipeline import PipelineStallError

        if isinstance(e, PipelineStallError):
            _exit_past_stuck_threads(e.exit_code)
        return e.exit_code
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else str(e))
        return 0
    except click.UsageError as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
        click.echo(f"pipecheck: error: {_one_line(e.format_message())}{hint}", err=True)
        return e.exit_code
    except click.ClickException as e:
        click.echo(f"pipecheck: error: {_one_line(e.format_message())}", err=True)
        return e.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("pipecheck: interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as e:
        return e.exit_code
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
