"""The ``pipecheck synthetic`` record: the target step time (compute alone)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from pipecheck.records.base import FORMAT_VERSION, Record, register_kind
from pipecheck.records.common import CompileInfo, Distribution, StepRecord, Throughput


@register_kind
@dataclasses.dataclass(frozen=True)
class SyntheticResult(Record):
    """``pipecheck synthetic``: the target step time (compute alone)."""

    KIND: ClassVar[str] = "synthetic"
    env: Mapping[str, Any]
    config: Mapping[str, Any]
    step_time: Distribution
    compile: CompileInfo
    throughput: Throughput
    warnings: tuple[str, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    format_version: int = FORMAT_VERSION
    kind: str = "synthetic"
