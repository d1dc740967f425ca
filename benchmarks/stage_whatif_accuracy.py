"""How well the stage what-if (``pipecheck whatif``: D were the transform stage's output
precomputed) predicts the pipeline built without the stage.

Each pipeline is built twice and both are measured on the same grid (workers 0..--max-workers
x read threads 1 and 4, in interleaved rounds, each setting's median round kept, as
``whatif_accuracy.py`` measures):

- calibrated: 20 ms of waiting and 3 ms of CPU per batch in its transform, 1 ms of the
  consumer's work; without the stage, only the consumer's 1 ms is left;
- demo: the demo's tokenizing of each document (``TokenizeAndPack``); without the stage,
  the same records read from the same source, their tokens made ahead of the run (each read
  still reads its record: pre-tokenized data is read from storage too, so only the stage
  goes).

The loader model is fitted to the whole grid with the stage, the stage's seconds per batch
(Grain's stage timing) are taken out, and each setting of the pipeline without the stage is
predicted as ``pipecheck whatif`` predicts it (``analysis.loader.whatif.stage_what_if``, its
``precomputed_loader_s``): |predicted - measured| / measured, its median and largest.

    PYTHONPATH=. python benchmarks/stage_whatif_accuracy.py [--max-workers 3] [--batches 30]
        [--seconds 1.0] [--rounds 3] [--only NAME] [--tables FILE] [--replay FILE]
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Callable

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.analysis.loader.whatif import stage_what_if
from pipecheck.data.grain_pipeline import BatchedExamples, InputPipeline, ensure_absl_flags_parsed
from pipecheck.data.sources import IndexedSource, open_records
from pipecheck.data.tokenizer import TokenizeAndPack
from pipecheck.host_cpus import usable_cores
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.whatif import WhatIfSetting
from pipecheck.workloads import resolve
from pipecheck.workloads.devices import host_batch_size, shard_by_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_tables import Tables, grid_arguments  # noqa: E402
from whatif_accuracy import error, grid, measure_rounds, pipeline, summary, typical  # noqa: E402


class PretokenizedSource:
    """The demo's records with their tokens made ahead: a read still reads its record from
    the source (pre-tokenized data is read from storage too) and returns the tokens made
    for it instead of its text."""

    def __init__(self, source: IndexedSource, tokens: list[dict]) -> None:
        self._source = source
        self._tokens = tokens

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: int) -> dict:
        self._source[index]
        return self._tokens[index]

    def __repr__(self) -> str:
        return "PretokenizedSource"


def pretokenized_demo() -> InputPipeline:
    """The demo's pipeline (source, shuffle, repeat, batches of its batch size) with every
    document tokenized before the run instead of by a map."""
    import grain

    cfg = resolve({"workload": "demo"})
    source = open_records(cfg["source"], num_docs=cfg["num_docs"], seed=cfg["seed"],
                          data_dir=cfg["data_dir"], split=cfg["split"])
    tokenize = TokenizeAndPack(cfg["seq_len"], cfg["text_key"])
    tokens = [tokenize(source[i]) for i in range(len(source))]
    examples = (shard_by_process(grain.MapDataset.source(PretokenizedSource(source, tokens)))
                .seed(cfg["seed"]).shuffle().repeat())
    return BatchedExamples(examples, host_batch_size(cfg["batch_size"], cfg["devices"]))


TWINS: dict[str, tuple[Callable[[], InputPipeline], Callable[[], InputPipeline]]] = {
    # name: (the pipeline with its stage, the same without it)
    "calibrated": (
        lambda: pipeline("calibrated", {"load_ms": 20.0, "cpu_ms": 3.0, "consumer_ms": 1.0}),
        lambda: pipeline("calibrated", {"consumer_ms": 1.0})),
    "demo": (lambda: pipeline("demo", {}), pretokenized_demo),
}


def report(name: str, with_stage: list[LoaderSetting], without: list[LoaderSetting],
           cores: int) -> list[float]:
    """Print each setting without the stage, predicted and measured; the errors."""
    try:
        model = lm.fit_loader_model(with_stage, cores)
    except lm.NotPredictable as e:
        print(f"\n{name}: no prediction: {e}")
        return []
    predicted = [(s, *stage_what_if(with_stage, model, WhatIfSetting.of(s.settings, cores)))
                 for s in without]
    stage_s = predicted[0][1] if predicted else None
    if stage_s is None:
        print(f"\n{name}: Grain's stage timing named no time for {model.stage}")
        return []
    print(f"\n{name}: {model.stage} takes {stage_s * 1e3:.2f} ms per batch; the model fitted "
          f"to {len(with_stage)} settings with it (D {min_d(with_stage):.2f}-"
          f"{max_d(with_stage):.2f} ms), the stage taken out")
    print(f"  {'setting':<28} {'with stage ms':>14} {'without, measured':>18} "
          f"{'predicted ms':>13} {'error':>7}  binds")
    errors = []
    by_setting = {(s.workers, s.threads): s for s in with_stage}
    for s, _, p in predicted:
        assert p is not None  # a stage time was found for the first, so for every setting
        errors.append(error(s, p.interval.value))
        before = by_setting[(s.workers, s.threads)].loader_time.value
        print(f"  {s.settings.short_label():<28} {before * 1e3:>14.2f} "
              f"{s.loader_time.value * 1e3:>18.2f} {p.interval.value * 1e3:>13.2f} "
              f"{100 * errors[-1]:>6.1f}%  {p.binding}")
    print(f"  {summary(errors)}")
    return errors


def min_d(table: list[LoaderSetting]) -> float:
    """The fastest D of the table, in ms."""
    return 1e3 * min(s.loader_time.value for s in table)


def max_d(table: list[LoaderSetting]) -> float:
    """The slowest D of the table, in ms."""
    return 1e3 * max(s.loader_time.value for s in table)


def main() -> None:
    args = grid_arguments(__doc__, batches=30, names=list(TWINS), rounds=3, seconds=1.0)
    ensure_absl_flags_parsed()
    cores = usable_cores()
    tables = Tables(args)
    print(f"grid: {len(grid(args.max_workers))} settings; {cores} cores; {args.batches}+ "
          f"batches and {args.seconds:g}+ s per setting; {args.rounds} rounds, each setting's "
          "median round kept")
    every = []
    for name in [args.only] if args.only else list(TWINS):
        built = {}
        for part, make in zip(("with stage", "without stage"), TWINS[name], strict=True):
            def measure(make=make, part=part, name=name) -> list[list[LoaderSetting]]:
                print(f"{name}, {part}", file=sys.stderr)
                return measure_rounds(make(), grid(args.max_workers), args.batches,
                                      args.rounds, args.seconds)

            built[part] = typical(tables.rounds(f"{name}, {part}", measure))
        every += report(name, built["with stage"], built["without stage"], cores)
    if every:
        print(f"\nall: median {100 * statistics.median(every):.1f}%, max "
              f"{100 * max(every):.1f}% over {len(every)} settings")


if __name__ == "__main__":
    main()
