"""The ``pipecheck whatif`` record: a loader setting's predicted loader time and step time,
what binds it, and the model fitted to the settings a compare or dataloader run measured.

Also the compare record's self-check (``WhatIfCheck``): one setting the model did not see,
predicted and then measured."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Mapping

from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.grain_settings import GrainSettings


@dataclasses.dataclass(frozen=True)
class Interval(Record):
    """A predicted time in seconds with its interval (``low`` <= ``value`` <= ``high``)."""

    value: float
    low: float
    high: float

    def relative_half_width(self) -> float:
        return (self.high - self.low) / 2.0 / self.value if self.value > 0 else math.inf


@dataclasses.dataclass(frozen=True)
class WhatIfSetting(Record):
    """A setting of Grain's four knobs and the host cores it would run on."""

    workers: int
    per_worker_buffer: int
    threads: int
    prefetch: int
    cores: int

    @classmethod
    def of(cls, settings: GrainSettings, cores: int) -> WhatIfSetting:
        return cls(settings.workers, settings.per_worker_buffer, settings.threads,
                   settings.prefetch, cores)

    def grain(self) -> GrainSettings:
        return GrainSettings(self.workers, self.per_worker_buffer, self.threads, self.prefetch)

    def label(self) -> str:
        return f"{self.grain().label()}, cores={self.cores}"


@dataclasses.dataclass(frozen=True)
class LoaderModelFit(Record):
    """The loader model's numbers, as fitted to the measured settings
    (``analysis.loader.loader_model``; docs/whatif.md)."""

    worker_cpu_s: float
    """CPU seconds a batch costs in the transforms (measured: the workers' CPU per batch)."""
    latency_s: float
    """Seconds a batch waits besides computing (I/O, sleeps): fitted to the measured D."""
    main_s: float
    """The training process's own seconds per batch with workers (measured)."""
    main_alone_s: float
    """The training process's seconds per batch without workers that cannot overlap,
    transforms included (measured: its CPU per batch, at most D; ``worker_cpu_s + main_s``
    when no such setting was)."""
    sharpness: float
    """How sharply the slowest resource alone sets the pace (a p-norm's exponent): fitted."""
    contention: float
    """Slow-down of the cores per runnable process past the core count: fitted (0 with few
    settings)."""
    cpu_scale: float
    """The measured CPU per batch's multiple that fits the cores' floor: fitted."""
    cores: int
    """The cores the settings were measured on."""
    stage: str
    """The pipeline stage that does the per-batch work (Grain's stage timing), or
    ``transforms`` when its stage timing was not recorded."""
    settings_fitted: int
    fit_error: float
    """Median |predicted - measured| / measured over the measured settings, each predicted by
    a model fitted without it (in-sample with fewer than 3 settings)."""
    noise: float
    """Median relative half-width of the measured settings' D intervals."""
    max_workers_measured: int
    max_reads_measured: int
    """The most parallel reads per process (min(threads, prefetch)) among the settings."""
    worker_rss_mb: float = math.nan
    main_rss_mb: float = math.nan
    ram_budget_mb: float | None = None
    main_alone_cpu_s: float = math.nan
    """The training process's whole CPU seconds per batch without workers, its read
    threads' included: what it asks of the cores (``worker_cpu_s + main_s`` when no such
    setting was; NaN in a record written before this was kept: ``main_alone_s`` stands
    in)."""


@register_kind
@dataclasses.dataclass(frozen=True)
class WhatIfResult(TopRecord):
    """``pipecheck whatif``: one setting's predicted loader time D and step time R."""

    KIND: ClassVar[str] = "whatif"
    source: str
    """The compare or dataloader record the model was fitted to."""
    source_kind: str
    setting: WhatIfSetting
    predicted_loader_s: Interval
    predicted_step_s: Interval | None
    """None for a dataloader record: it holds no T (compute alone)."""
    binding: str
    """What sets the step's pace: ``compute``, a pipeline stage's name, ``main-process``,
    ``cpu-cores`` or ``memory``."""
    loader_binding: str
    """What sets the loader's pace at this setting (the same words, without compute)."""
    model: LoaderModelFit
    target_s: Interval | None = None
    """T as the source record measured it (compare only)."""
    interference: float | None = None
    """R / max(T, D) at the setting the compare run chose: how much slower training on real
    data was than the slower of its parts, applied to the prediction."""
    cores_needed: int | None = None
    """The fewest host cores with which the loader keeps up with T at this setting (None:
    no T, or no number of cores is enough)."""
    host_keeps_up: bool | None = None
    """Whether any setting the model knows keeps up with T on the measured host's cores."""
    host_setting: GrainSettings | None = None
    """The cheapest such setting."""
    stage_s: float | None = None
    """Seconds per batch the transform stage (``model.stage``) takes, from Grain's stage
    timing (None: not timed)."""
    precomputed_loader_s: Interval | None = None
    """D at this setting were that stage's output precomputed (pre-tokenized, cached)."""
    precomputed_binding: str | None = None
    notes: tuple[str, ...] = ()
    env: Mapping[str, object] = dataclasses.field(default_factory=dict)
    read_latency_s: float | None = None
    """Seconds every read of the source was taken to be slower than measured
    (``--read-latency``; None: as measured). ``model`` is the fit to the measured
    settings; the prediction adds ``reads_per_batch x read_latency_s`` to its waiting."""
    reads_per_batch: int | None = None
    """Reads of the source a batch makes (one per example), with ``read_latency_s``."""

    @property
    def predicted_batches_per_s(self) -> float:
        step = self.predicted_step_s or self.predicted_loader_s
        return 1.0 / step.value if step.value > 0 else math.nan


@dataclasses.dataclass(frozen=True)
class WhatIfCheck(Record):
    """compare's self-check: a setting the model did not see, predicted, then measured
    (read again, longer, when the first reading was too unsure to judge a 10% error)."""

    setting: WhatIfSetting
    predicted_loader_s: Interval
    measured_loader_s: Interval
    """D as read over ``batches``: the longer reading when there were two."""
    binding: str = ""
    batches: int = 0
    """The batches the reading kept timed (0: a record written before they were kept)."""
    reads: int = 1
    """The readings taken: 2 when the first's interval was too wide to judge a 10% error
    (``analysis.loader.whatif.CHECK_PRECISION``) and the setting was read again, longer."""
    first_measured_loader_s: Interval | None = None
    """The first, shorter reading when there were two (None: read once)."""

    @property
    def error(self) -> float:
        """|predicted - measured| / measured."""
        m = self.measured_loader_s.value
        return abs(self.predicted_loader_s.value - m) / m if m > 0 else math.nan
