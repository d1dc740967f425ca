"""``pipecheck whatif``: a loader setting's predicted loader time and step time, from the
settings a compare or dataloader record measured."""

from __future__ import annotations

import click

from pipecheck.analysis.loader.loader_model import MissingNumbers, NotPredictable
from pipecheck.analysis.loader.whatif import MAX_KNOB, Asked, what_if
from pipecheck.cli.group import CONTEXT_SETTINGS, cli
from pipecheck.cli.option_specs import OptionSpec, declare
from pipecheck.cli.options import Duration
from pipecheck.errors import PipecheckError, ResultFormatError
from pipecheck.records import store
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.report.whatif import format_whatif


def _count(low: int, what: str, default: str = "the run's chosen setting"
           ) -> dict[str, object]:
    return {"type": click.IntRange(low, MAX_KNOB), "default": None, "metavar": "N",
            "help": f"{what} [default: {default}]"}


WHATIF_OPTIONS = (
    OptionSpec("--workers", "workers", _count(0, "Grain worker processes.")),
    OptionSpec("--per-worker-buffer-size", "per_worker_buffer",
               _count(1, "Batches each worker may hold ready (per_worker_buffer_size)."),
               old=("--buffer",)),
    OptionSpec("--threads", "threads", _count(0, "Read threads per process (num_threads).")),
    OptionSpec("--prefetch-buffer-size", "prefetch",
               _count(0, "Read prefetch buffer (prefetch_buffer_size; 0: 2 x threads)."),
               old=("--prefetch",)),
    OptionSpec("--cores", "cores", _count(1, "Host CPU cores the loader would run on.",
                                          "the measured host's")),
)
"""whatif's options, declared once."""


class NoPrediction(PipecheckError):
    """The record's measurements cannot be predicted from (too few, too noisy, a pipeline
    that fixes its own settings): said in one line instead of a number."""


WHAT_TO_PASS = ("pass the file that pipecheck compare --json or pipecheck dataloader --json "
                "wrote")


def load_measured(path: str) -> CompareResult | DataloaderResult:
    """A compare or dataloader record; any other file or kind is refused in one line that
    says which file to pass."""
    try:
        record = store.load(path)
    except ResultFormatError as e:
        raise ResultFormatError(f"{e}; {WHAT_TO_PASS}") from None
    if not isinstance(record, (CompareResult, DataloaderResult)):
        raise ResultFormatError(
            f"{path} holds a {getattr(record, 'kind', '?')!r} record; whatif reads a 'compare' or "
            "'dataloader' record (pipecheck compare --json, pipecheck dataloader --json)")
    return record


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("run_json", type=click.Path(exists=True, dir_okay=False))
@declare(WHATIF_OPTIONS)
@click.option("--read-latency", "read_latency_s", type=Duration(), default=None,
              help="Predict were every read of the source this much slower (30ms, 0.03s): "
                   "data moved to slower storage. [default: as measured]")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write the versioned whatif record to this JSON file (atomically).")
@click.option("--force", is_flag=True, help="Overwrite the --json file if it exists.")
def whatif(run_json: str, read_latency_s: float | None, json_path: str | None, force: bool,
           **knobs: int | None) -> None:
    """Predict the loader time D and the step time for a setting of Grain's knobs and a
    host's cores, from the settings a compare or dataloader run measured (RUN.json), with
    an interval, what binds (compute, a pipeline stage, the main process, the CPU cores,
    memory) and the fewest cores that keep up. Knobs not given keep the run's chosen
    setting; --read-latency adds latency to every read. See docs/whatif.md."""
    store.check_writable(json_path, force)
    record = load_measured(run_json)
    try:
        result = what_if(record, run_json, Asked(**knobs, read_latency_s=read_latency_s))
    except MissingNumbers as e:
        raise ResultFormatError(f"{run_json}: {e}") from None
    except NotPredictable as e:
        raise NoPrediction(f"no prediction from {run_json}: {e}") from None
    click.echo(format_whatif(result), nl=False)
    if json_path:
        store.save(result, json_path, force)
        click.echo(f"\nwrote {json_path}")
