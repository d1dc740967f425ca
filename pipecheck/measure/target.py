"""compare's target stage: T, the step time of compute alone, measured or read from a file.

T is measured twice: before the loader search (the search aims below it) and briefly after
the real-data run, so that a change of the machine's speed during the run is seen.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping

from pipecheck.analysis.drift import drift_warning
from pipecheck.config import RunConfig
from pipecheck.measure.synthetic import measure_synthetic
from pipecheck.progress import Progress
from pipecheck.records import store
from pipecheck.records.env import input_warnings
from pipecheck.records.synthetic import SyntheticResult
from pipecheck.units import ms
from pipecheck.workloads.base import Workload

DEFAULT_TARGET_STEPS = 30
"""Synthetic steps for the target step time (half as many again after the real run)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """The synthetic run T came from, and the warnings about its input file."""

    result: SyntheticResult
    warnings: tuple[str, ...] = ()


def read_target(path: str, config: Mapping[str, object]) -> Target:
    syn = store.load(path, expect=SyntheticResult)
    return Target(syn, tuple(input_warnings(path, syn.env, syn.config, config)))


def measure_target(config: RunConfig, steps: int, workload: Workload,
                   clock: Callable[[], float] = time.perf_counter) -> Target:
    return Target(measure_synthetic(config, steps, clock=clock, workload=workload))


def target_again(config: RunConfig, steps: int, workload: Workload, before: Target,
                 clock: Callable[[], float] = time.perf_counter
                 ) -> tuple[tuple[float, ...], str | None]:
    """T measured again after the real-data run: its samples and a drift warning, if any."""
    after = measure_synthetic(config, steps, clock=clock, workload=workload)
    warning = drift_warning(before.result.step_time.summary.median,
                            after.step_time.summary.median)
    return after.step_time.samples_s, warning


def target_stage(config: RunConfig, path: str | None, steps: int, workload: Workload | None,
                 progress: Progress,
                 clock: Callable[[], float] = time.perf_counter) -> Target:
    """compare's step 1: T read from ``path``, or measured."""
    if path:
        target = read_target(path, config.to_dict())
    else:
        assert workload is not None
        progress.say(f"[1/4] target step time: {steps} synthetic steps")
        target = measure_target(config, steps, workload, clock)
    progress.say(f"      target step time T = {ms(target.result.step_time.summary.median)}")
    return target
