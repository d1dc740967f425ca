"""Steps in the one shape records hold them in, for tests that build them by hand."""

from __future__ import annotations

from typing import Iterable

from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable


def table(rows: Iterable[StepRecord]) -> StepTable[StepRecord]:
    """``rows`` (StepRecord) as a StepTable."""
    return StepTable.from_rows(StepRecord, list(rows))
