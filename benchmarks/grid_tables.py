"""What the grid benchmarks (whatif_accuracy.py, stage_whatif_accuracy.py,
model_tuner_vs_grid.py) share: their command line, and their tables of measured settings
(one list per table, or one list per round), measured here or replayed from a JSON file."""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Callable

from pipecheck.records.base import from_dict, to_dict
from pipecheck.records.dataloader import LoaderSetting


def grid_arguments(doc: str, batches: int, names: list[str], rounds: int = 0,
                   seconds: float = 0.0) -> argparse.Namespace:
    """The grid benchmarks' options: the grid's size, batches per setting, rounds of the
    grid and the least seconds per setting (each with its default when given), one
    pipeline, and the tables to write or to replay."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--max-workers", type=int, default=3)
    ap.add_argument("--batches", type=int, default=batches)
    if rounds:
        ap.add_argument("--rounds", type=int, default=rounds,
                        help="measure the grid this many times, interleaved")
    if seconds:
        ap.add_argument("--seconds", type=float, default=seconds,
                        help="time each setting for at least this long")
    ap.add_argument("--only", choices=sorted(names))
    ap.add_argument("--tables", help="write the measured tables to this JSON file")
    ap.add_argument("--replay", help="read the tables from this JSON file instead")
    return ap.parse_args()


class Tables:
    """Each pipeline's table: replayed from ``--replay`` where it holds one, else measured;
    every table so far written to ``--tables`` after each pipeline (a long run cut short
    keeps what it measured)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.stored: dict[str, list] = (
            json.loads(pathlib.Path(args.replay).read_text()) if args.replay else {})
        self.path: str | None = args.tables
        self.tables: dict[str, list] = {}

    def table(self, name: str, measure: Callable[[], list[LoaderSetting]]
              ) -> list[LoaderSetting]:
        if name in self.stored:
            table = [from_dict(LoaderSetting, d) for d in self.stored[name]]
        else:
            table = measure()
        self._keep(name, [to_dict(s) for s in table])
        return table

    def rounds(self, name: str, measure: Callable[[], list[list[LoaderSetting]]]
               ) -> list[list[LoaderSetting]]:
        """The table measured in rounds (each round a list of settings); a stored table of
        one list is one round."""
        if name in self.stored:
            stored = self.stored[name]
            lists = stored if stored and isinstance(stored[0], list) else [stored]
            rounds = [[from_dict(LoaderSetting, d) for d in r] for r in lists]
        else:
            rounds = measure()
        self._keep(name, [[to_dict(s) for s in r] for r in rounds])
        return rounds

    def _keep(self, name: str, table: list) -> None:
        self.tables[name] = table
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.tables, f)
