"""Loading that waits on storage, told from loading that computes. Pure functions.

At one measured setting two readings say where a batch's time goes:

- the *reading stage* (``records.dataloader.Reads``, from Grain's stage timing of the stage
  that reads the data source, ``SourceMapDataset``): its wall time per read, the reads a
  batch takes, and its share of the time the pipeline waits;
- the *CPU the processes spent* (``records.dataloader.Resources``): CPU seconds per batch of
  the training process and the workers, plus the time their threads waited for a core (CPU
  they wanted and did not get on a busy machine, which is computing all the same).

A setting is **storage-bound** (``is_storage_bound``) when all three hold:

1. the pipeline waits on its reading stage (wait ratio >= ``READ_WAIT_SHARE``);
2. reading takes the time: the reads' wall time per batch is at least ``READ_TIME_SHARE``
   of the wall time the processes producing batches had (D times their number);
3. the processes did not compute it: their CPU (and run-queue wait) per batch is below
   ``STORAGE_CPU_SHARE`` of that wall time.

Then batches wait on reads that sleep (a network filesystem, an object store, a slow disk),
and the cheap fix is more reads in flight: read threads (``grain.ReadOptions(num_threads,
prefetch_buffer_size)``), which overlap the waiting at little CPU and memory cost; worker
processes overlap it too but each costs a process's CPU and memory. A CPU-bound pipeline
from a local disk fails 2 (its reads take microseconds) and 3 (its processes compute);
a source that decodes on the CPU fails 3; threads that queue on the GIL fail 3 too (D is
then the CPU serialized, not a wait).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal, Sequence

from pipecheck.records.common import Finding
from pipecheck.records.dataloader import LoaderSetting, Reads, Stage
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.units import ms

STORAGE_BOUND: Literal["storage-bound"] = "storage-bound"

READ_STAGE_PREFIX = "Source"
"""Grain names the stage that reads a data source ``SourceMapDataset(source=...)``
(``MapDataset.source``): the reading stage is the stage whose name starts so."""

READ_WAIT_SHARE = 0.5
"""The pipeline waits on its reading stage at least half of the time it waits (Grain's wait
ratio): reading is what a batch waits for, not one stage among others."""

READ_TIME_SHARE = 0.5
"""The reads' wall time per batch (summed over reads in flight) is at least half of the wall
time the processes producing batches had per batch: reads fill the batch time, so their
latency is what a faster setting must hide. Reads from a local disk or the page cache take
microseconds and never reach it."""

STORAGE_CPU_SHARE = 0.5
"""The processes computed (or waited for a core) less than half of the wall time they had
per batch: the rest they slept, waiting on the reads. Read on this 2-core machine: the slow
mount (20 ms a read) 0.03-0.05 at one read thread and 0.2-0.5 at sixteen (each batch wakes
sixteen threads); the demo's tokenizer from the local disk 1.2-1.4 (run-queue waits
included)."""

MAX_READ_THREADS = 16
"""The most read threads a fix suggests: Grain's own default ``num_threads`` and MaxText's
``grain_num_threads``; past it prefetch buffers grow and the GIL-holding part of each read
queues."""

READS_SHARE_OF_GOAL = 0.75
"""A fix's read threads bring the reads to three quarters of the batch time aimed at: the
rest is for the CPU each batch still costs and for reads that queue behind a slow one."""

MIN_FLOOR_S = 1e-4
"""The least batch time a fix aims at when the processes' CPU per batch reads near zero:
0.1 ms, below any pipeline's per-batch overhead."""


def read_stage(stages: Sequence[Stage]) -> Stage | None:
    """The stage that reads the data source (``READ_STAGE_PREFIX``; the busiest if several),
    or None: a pipeline with no such stage timed (a generator, a ``grain.DataLoader``)."""
    timed = [s for s in stages if s.name.startswith(READ_STAGE_PREFIX) and s.n > 0
             and math.isfinite(s.avg_s)]
    return max(timed, key=lambda s: s.total_s) if timed else None


def reads_of(stages: Sequence[Stage]) -> Reads | None:
    """The reading stage's latency per read and reads per batch: its elements per element of
    the output stage on its side (the first stage timed, output first, in the same process
    or processes: the workers' stages are counted together, by other reports than the
    training process's, which lag behind them)."""
    stage = read_stage(stages)
    output = next((s for s in stages if s.n > 0 and s.where == stage.where), None) \
        if stage is not None else None
    if stage is None or output is None:
        return None
    return Reads(stage=stage.name, where=stage.where, read_s=stage.avg_s,
                 reads_per_batch=stage.n / output.n, wait_ratio=stage.wait_ratio)


@dataclasses.dataclass(frozen=True)
class StorageEvidence:
    """What the decision reads of one setting."""

    reads: Reads
    batch_s: float
    """D: seconds per steady batch."""
    cpu_s_per_batch: float
    """CPU seconds per batch of the training process and the workers, with the time their
    threads waited for a core."""
    processes: int
    """Processes producing batches side by side: the workers, or the training process."""

    @property
    def wall_s_per_batch(self) -> float:
        """Wall time the producing processes had per batch, together."""
        return self.batch_s * self.processes

    @property
    def cpu_share(self) -> float:
        """Share of that wall time the processes computed (or wanted to)."""
        return self.cpu_s_per_batch / self.wall_s_per_batch if self.wall_s_per_batch > 0 \
            else math.nan

    @property
    def read_share(self) -> float:
        """The reads' wall time per batch against the processes' wall time per batch."""
        return self.reads.read_s_per_batch / self.wall_s_per_batch \
            if self.wall_s_per_batch > 0 else math.nan


def evidence_of(setting: LoaderSetting) -> StorageEvidence | None:
    """The setting's evidence, or None without its reading stage or its resources."""
    r = setting.resources
    if setting.reads is None or r is None or not r.batches or not r.wall_s > 0:
        return None
    cpu = (r.main_cpu_s + r.worker_cpu_s + r.main_wait_s + r.worker_wait_s) / r.batches
    return StorageEvidence(setting.reads, setting.loader_time.value, cpu,
                           max(1, setting.workers))


def is_storage_bound(e: StorageEvidence) -> bool:
    """Loading waits on storage (the module docstring's three conditions)."""
    return (e.reads.wait_ratio >= READ_WAIT_SHARE and e.read_share >= READ_TIME_SHARE
            and e.cpu_share < STORAGE_CPU_SHARE)


def storage_bound(setting: LoaderSetting) -> bool:
    """``is_storage_bound`` on a measured setting (False where it lacks the evidence)."""
    e = evidence_of(setting)
    return e is not None and is_storage_bound(e)


def read_threads_for(e: StorageEvidence, goal_s: float | None = None) -> int:
    """Read threads per process that bring the reads to ``READS_SHARE_OF_GOAL`` of ``goal_s``
    per batch (without a goal: of the processes' CPU per batch, where reading stops being
    the floor): the reads' wall time per batch over the time each process may spend on
    them, rounded up to a power of two (the tuner's thread ladder), at least 2 and at most
    ``MAX_READ_THREADS``."""
    floor = goal_s if goal_s is not None and goal_s > 0 else \
        max(e.cpu_s_per_batch / e.processes, MIN_FLOOR_S)
    needed = math.ceil(e.reads.read_s_per_batch / (READS_SHARE_OF_GOAL * floor * e.processes))
    return min(MAX_READ_THREADS, 1 << (max(2, needed) - 1).bit_length())


def evidence_text(e: StorageEvidence) -> str:
    """The numbers in words: latency per read, reads per batch, the CPU share."""
    return (f"{ms(e.reads.read_s)} a read, {e.reads.reads_per_batch:.0f} reads a batch, the "
            f"processes computing {100 * e.cpu_share:.0f}% of the time")


def threads_first_reason(e: StorageEvidence) -> str:
    """Why a search tries read threads before worker processes."""
    return (f"reads wait on storage ({evidence_text(e)}): read threads tried before worker "
            "processes, since threads overlap the waiting at little CPU and memory cost")


def fix_setting(setting: LoaderSetting, e: StorageEvidence,
                chosen: GrainSettings | None = None, goal_s: float | None = None
                ) -> GrainSettings:
    """The setting a storage fix names: ``chosen`` (a search's choice) where it reads with
    more threads than ``setting``, else ``setting`` with ``read_threads_for`` threads."""
    if chosen is not None and chosen.threads > setting.threads:
        return chosen
    return dataclasses.replace(setting.settings, threads=read_threads_for(e, goal_s),
                               prefetch=0)


def storage_finding(settings: Sequence[LoaderSetting],
                    read_options: Callable[[GrainSettings], str] = GrainSettings.read_options_text,
                    chosen: GrainSettings | None = None,
                    goal_s: float | None = None) -> Finding | None:
    """The ``storage-bound`` finding of the settings measured, on the storage-bound one with
    the fewest reads in flight (where the waiting shows plainest), or None when none is.
    ``read_options`` writes the fix in the pipeline's own terms (Grain's ReadOptions, a
    framework's config keys)."""
    bound = [(s, e) for s in settings if (e := evidence_of(s)) is not None
             and is_storage_bound(e)]
    if not bound:
        return None
    setting, e = min(bound, key=lambda p: p[0].settings.parallel_reads())
    fix = fix_setting(setting, e, chosen, goal_s)
    where = setting.settings.short_label()
    return Finding(
        kind=STORAGE_BOUND,
        message=(f"loading waits on storage at {where}: each read takes {ms(e.reads.read_s)} "
                 f"in {e.reads.stage}, {e.reads.reads_per_batch:.0f} reads a batch "
                 f"({ms(e.reads.read_s_per_batch)} of reading per batch), and the processes "
                 f"computed only {100 * e.cpu_share:.0f}% of the {ms(e.batch_s)} a batch "
                 "takes: the reads sleep, so more reads in flight make it faster and more "
                 "CPU does not"),
        numbers={"read_s": e.reads.read_s, "reads_per_batch": e.reads.reads_per_batch,
                 "cpu_share": e.cpu_share, "read_wait_ratio": e.reads.wait_ratio,
                 "batch_s": e.batch_s, "cpu_s_per_batch": e.cpu_s_per_batch,
                 "suggested_threads": float(fix.threads)},
        location=where,
        fix=(f"read with more threads: {read_options(fix)}; threads overlap the reads' "
             "waiting at little CPU and memory cost (worker processes cost both)"),
    )


def storage_note(setting: LoaderSetting) -> str:
    """Why a search should try read threads first at this setting (``threads_first_reason``),
    or "" when its reads do not wait on storage: what the tuner's Trial carries."""
    e = evidence_of(setting)
    return threads_first_reason(e) if e is not None and is_storage_bound(e) else ""
