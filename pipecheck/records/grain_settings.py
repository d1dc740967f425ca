"""Grain's performance knobs as one value: what the tuner searches and a saved config holds.

``workers`` and ``per_worker_buffer`` are ``grain.MultiprocessingOptions(num_workers,
per_worker_buffer_size)``; ``threads`` and ``prefetch`` are ``grain.ReadOptions(num_threads,
prefetch_buffer_size)``. No Grain import here: :meth:`GrainSettings.options` imports it when
called.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pipecheck.records.base import Record

if TYPE_CHECKING:  # pragma: no cover
    import grain

DEFAULT_PER_WORKER_BUFFER = 2
"""Batches each worker may hold ready: two let a worker produce the next batch while the
previous one waits to be taken (Grain's own default of 1 leaves bursty workers idle)."""
DEFAULT_THREADS = 1
"""Read threads per process: one keeps a GIL-holding transform from fighting itself
(16 threads were 4x slower than none on 2 cores for a numpy map)."""


def default_prefetch(threads: int) -> int:
    """Grain's read prefetch buffer pipecheck uses unless told: two elements in flight per
    read thread (at least one)."""
    return max(1, 2 * threads)


@dataclasses.dataclass(frozen=True)
class GrainSettings(Record):
    """One setting of Grain's four performance knobs."""

    workers: int = 0
    """MultiprocessingOptions.num_workers (0: the pipeline runs in the training process)."""
    per_worker_buffer: int = DEFAULT_PER_WORKER_BUFFER
    """MultiprocessingOptions.per_worker_buffer_size."""
    threads: int = DEFAULT_THREADS
    """ReadOptions.num_threads."""
    prefetch: int = 0
    """ReadOptions.prefetch_buffer_size (0: ``default_prefetch(threads)``)."""

    def __post_init__(self) -> None:
        for name in ("workers", "threads", "prefetch"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.per_worker_buffer < 1:
            raise ValueError(f"per_worker_buffer must be >= 1, got {self.per_worker_buffer}")
        if self.prefetch == 0:
            object.__setattr__(self, "prefetch", default_prefetch(self.threads))

    def cost(self) -> tuple[int, int, int, int]:
        """Order of cheapness: fewest workers, then the smallest buffers (per-worker buffer,
        read prefetch), then the fewest read threads."""
        return (self.workers, self.per_worker_buffer, self.prefetch, self.threads)

    def parallel_reads(self) -> int:
        """Batches read at once: each worker (or the training process) runs up to
        min(threads, prefetch) reads in parallel. They arrive in bursts of this many."""
        return max(1, self.workers) * max(1, min(self.threads, self.prefetch))

    def label(self) -> str:
        return (f"workers={self.workers}, buffer={self.per_worker_buffer}, "
                f"threads={self.threads}, prefetch={self.prefetch}")

    def short_label(self) -> str:
        """``workers=W, threads=T``, with the buffers only when they are not pipecheck's
        defaults: how reports and findings name a setting."""
        label = f"workers={self.workers}, threads={self.threads}"
        if (self.per_worker_buffer, self.prefetch) != (DEFAULT_PER_WORKER_BUFFER,
                                                       default_prefetch(self.threads)):
            label += f", buffer={self.per_worker_buffer}, prefetch={self.prefetch}"
        return label

    def advice(self) -> str:
        """What to use, in words and as Grain code: the worker count alone when the other
        knobs are pipecheck's defaults."""
        w = self.workers
        if w == 0:
            return (f"{self.threads} read threads in the training process and no Grain workers "
                    f"(grain.ReadOptions(num_threads={self.threads}, "
                    f"prefetch_buffer_size={self.prefetch}), no mp_prefetch)")
        if (self.per_worker_buffer, self.threads, self.prefetch) == \
                (DEFAULT_PER_WORKER_BUFFER, DEFAULT_THREADS, default_prefetch(DEFAULT_THREADS)):
            return f"{w} Grain workers (grain.MultiprocessingOptions(num_workers={w}))"
        return (f"{w} Grain workers with {self.threads} read threads "
                f"(grain.MultiprocessingOptions(num_workers={w}, "
                f"per_worker_buffer_size={self.per_worker_buffer}), "
                f"grain.ReadOptions(num_threads={self.threads}, "
                f"prefetch_buffer_size={self.prefetch}))")

    def read_options_text(self) -> str:
        """The read knobs as Grain code: ``grain.ReadOptions(num_threads=T,
        prefetch_buffer_size=P)``, with the workers that each read so when there are any."""
        read = (f"grain.ReadOptions(num_threads={self.threads}, "
                f"prefetch_buffer_size={self.prefetch})")
        return read if self.workers == 0 else f"{read} in each of {self.workers} Grain workers"

    def options(self) -> tuple[grain.MultiprocessingOptions, grain.ReadOptions]:
        """``(grain.MultiprocessingOptions, grain.ReadOptions)`` for this setting."""
        # lazy: Grain imported where used, so `import pipecheck` stays light
        import grain

        return (grain.MultiprocessingOptions(num_workers=self.workers,
                                             per_worker_buffer_size=self.per_worker_buffer),
                grain.ReadOptions(num_threads=self.threads, prefetch_buffer_size=self.prefetch))


class SettingsKnobs:
    """The four knobs of a record's ``settings`` (a GrainSettings, where they are stored once),
    read by name."""

    settings: GrainSettings

    @property
    def workers(self) -> int:
        return self.settings.workers

    @property
    def threads(self) -> int:
        return self.settings.threads

    @property
    def per_worker_buffer(self) -> int:
        return self.settings.per_worker_buffer

    @property
    def prefetch(self) -> int:
        return self.settings.prefetch
