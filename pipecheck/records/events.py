"""What a run observes as it goes, before a record is built from it: host spans, running
totals over its steps, compile events. Plain values, not stored in files; the measuring
modules (``measure/spans``, ``measure/compile_watch``) produce them, the analysis and the
trace writer read them."""

from __future__ import annotations

import dataclasses
from typing import Iterable

import numpy as np

from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable


@dataclasses.dataclass(frozen=True)
class Span:
    """A timed piece of host work (clock readings in seconds; ``depth``: how many spans
    enclosed it)."""

    name: str
    start: float
    end: float
    depth: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclasses.dataclass
class StepTotals:
    """Running sums over every step of a run (the StepRecords themselves may be dropped)."""

    steps: int = 0
    wall_s: float = 0.0
    spans: dict[str, float] = dataclasses.field(default_factory=dict)
    tag_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    compile_dispatch_s: float = 0.0
    """Dispatch time of the steps tagged ``compile`` (where tracing and compiling happen)."""

    def add(self, record: StepRecord) -> None:
        self.steps += 1
        self.wall_s += record.time_s
        for name, seconds in record.spans.items():
            self.spans[name] = self.spans.get(name, 0.0) + seconds
        for t in record.tags:
            self.tag_counts[t] = self.tag_counts.get(t, 0) + 1
        if "compile" in record.tags:
            self.compile_dispatch_s += record.spans.get("dispatch", 0.0)

    def add_table(self, table: StepTable[StepRecord]) -> None:
        """Add every step of ``table`` (the same sums as ``add`` row by row)."""
        self.steps += len(table)
        self.wall_s += float(table.column("time_s").sum())
        spans = table.map_columns("spans")
        for name, col in spans.items():
            present = col[~np.isnan(col)]
            if present.size:
                self.spans[name] = self.spans.get(name, 0.0) + float(present.sum())
        for tags in table.tagged().values():
            for t in tags:
                self.tag_counts[t] = self.tag_counts.get(t, 0) + 1
        compiled = table.tag_mask("compile")
        dispatch = spans.get("dispatch")
        if compiled.any() and dispatch is not None:
            self.compile_dispatch_s += float(np.nansum(dispatch[compiled]))

    def copy(self) -> StepTotals:
        return dataclasses.replace(self, spans=dict(self.spans), tag_counts=dict(self.tag_counts))

    @classmethod
    def of(cls, records: Iterable[StepRecord]) -> StepTotals:
        totals = cls()
        for r in records:
            totals.add(r)
        return totals


@dataclasses.dataclass(frozen=True)
class CompileEvent:
    """One compile phase JAX reported (``jax.monitoring`` event name) for a function."""

    event: str
    fun_name: str
    duration_s: float
    at: float
    """Clock reading when the event was reported (the watcher's clock)."""
