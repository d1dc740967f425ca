"""The closed sets of names a record may carry: verdicts, how a pipeline scales, why a
worker search stopped, host span names, where a step's time went, step tags and finding
kinds.

They are ``Literal`` types, so mypy checks every place that makes or reads one; in JSON
they are plain strings."""

from __future__ import annotations

import typing
from typing import Literal, Mapping

VerdictKind = Literal["compute-bound", "input-bound", "forced-sync", "host-bound",
                      "inconclusive"]
"""The one verdict vocabulary of every command's record (``verdict``) and headline: what
bounds the steps. ``host-bound``: the device waits for the host to launch its work (many
small jitted calls); ``profile`` calls it, and any command may. A report shows a verdict
with ``verdict_text``."""

COMPUTE_BOUND: VerdictKind = "compute-bound"
INPUT_BOUND: VerdictKind = "input-bound"
FORCED_SYNC: VerdictKind = "forced-sync"
HOST_BOUND: VerdictKind = "host-bound"
INCONCLUSIVE: VerdictKind = "inconclusive"
VERDICTS: tuple[VerdictKind, ...] = typing.get_args(VerdictKind)

VERDICT_TEXTS: Mapping[str, str] = {HOST_BOUND: "host-bound (dispatch)"}
"""How reports and sentences spell a verdict where it is not its value itself: host-bound
says what the host is busy with."""


def verdict_text(verdict: str) -> str:
    """A verdict as every report shows it (headlines, tables, sentences): its value, or its
    ``VERDICT_TEXTS`` spelling. The one mapping from a record's ``verdict`` to the screen;
    any other string (``watch``'s ``host work``) is shown as it is."""
    return VERDICT_TEXTS.get(verdict, verdict)

Scaling = Literal["latency-bound", "cpu-bound", "unknown"]
"""How a pipeline's batch time responds to workers past the core count."""
LATENCY_BOUND: Scaling = "latency-bound"
CPU_BOUND: Scaling = "cpu-bound"
UNKNOWN_SCALING: Scaling = "unknown"

StopKind = Literal["met", "no-gain", "stopped-scaling", "ceiling", "ram-ceiling", "fixed",
                   "from-file", "pipeline"]
"""Why the worker search ended: a count met the goal; a step gained less than MIN_GAIN;
scaling fell below SCALING_EFFICIENCY_FLOOR; the --max-workers ceiling or the RAM budget
was reached; the counts were fixed by --workers; the settings were read from a file (no
search); the pipeline runs its own mp_prefetch workers (measured as it is, no search)."""

SpanName = Literal["data_wait", "device_put", "dispatch", "sync", "log", "checkpoint", "eval",
                   "gc"]
"""The host spans pipecheck itself records (users may add their own names), in the order
reports list them: getting the batch, running the step, then the hooks."""
SPAN_NAMES: tuple[SpanName, ...] = typing.get_args(SpanName)
FORCED_SYNC_SPAN = "forced_sync"
"""A Monitor step's ``spans`` key that no span the loop opens: the seconds the sync locator
found the loop blocked in the user's syncs outside any span in that step, taken out of its
``other`` (``analysis.breakdown.charge_forced_syncs``)."""
STEP_SPAN_NAMES: tuple[str, ...] = (*SPAN_NAMES, FORCED_SYNC_SPAN)
"""Every ``spans`` key of a step that pipecheck writes (``other`` apart)."""
DATA_SPANS: tuple[SpanName, ...] = ("data_wait", "device_put")
"""The spans that wait for or move input data."""
HOOK_SPANS: tuple[SpanName, ...] = ("checkpoint", "eval", "log", "gc")
"""Host work a step's hooks (or a collection) do outside fetching and running steps."""

TimeKind = Literal["input", "compile", "compute", "sync", "dispatch", "checkpoint", "eval",
                   "gc", "host", "other"]
"""Where a step's time went: the one vocabulary of the Monitor's and pipecheck's own loops
(their spans), the wall-time table (compare, synthetic, the Monitor), a capture's device
idle time (profile) and the page. ``input``: waiting for a batch and moving it to the
devices; ``compile``: JAX tracing and compiling; ``compute``: the host dispatching the step
and waiting in the lagged sync while the device computes; ``sync``: blocked in a sync the
loop did not need; ``dispatch``: launching jitted calls (a capture tells it apart; a timed
loop counts it in ``compute``); ``checkpoint``, ``eval``, ``gc``: that host work; ``host``:
a capture's other host work; ``other``: the rest of a timed loop's interval (loop
overhead, user code outside any span). Each view keeps its own names in files (the tables
below): those are the format, these are what they mean."""
TIME_KINDS: tuple[TimeKind, ...] = typing.get_args(TimeKind)
INPUT: TimeKind = "input"
COMPILE: TimeKind = "compile"
COMPUTE: TimeKind = "compute"
SYNC: TimeKind = "sync"
DISPATCH: TimeKind = "dispatch"
CHECKPOINT: TimeKind = "checkpoint"
EVAL: TimeKind = "eval"
GC: TimeKind = "gc"
HOST: TimeKind = "host"
OTHER: TimeKind = "other"

SPANS_OF: Mapping[TimeKind, tuple[str, ...]] = {
    INPUT: DATA_SPANS, COMPUTE: ("dispatch", "sync"), SYNC: ("log", FORCED_SYNC_SPAN),
    CHECKPOINT: ("checkpoint",), EVAL: ("eval",), GC: ("gc",)}
"""The host spans a timed loop (the Monitor's, compare's, synthetic's) charges to each kind
(``compile`` is taken out of ``compute`` by the compile events; ``other`` is what no span
covers)."""

WALL_ROWS: Mapping[TimeKind, str] = {
    COMPILE: "compile", INPUT: "data wait", COMPUTE: "compute", SYNC: "sync stall",
    CHECKPOINT: "checkpoint", EVAL: "eval", GC: "gc", OTHER: "other"}
"""The wall-time table's row of each kind (``Breakdown.rows[].category`` in files), in the
table's order; user spans come before ``other``."""

DEVICE_BUSY_ROW = "device busy"
"""A capture's device-time table: the row of the device's busy time (``compute`` as the
device sees it)."""

IDLE_ROWS: Mapping[TimeKind, str] = {
    INPUT: "idle: input wait", SYNC: "idle: sync", COMPILE: "idle: compile",
    CHECKPOINT: "idle: checkpoint", DISPATCH: "idle: dispatch", HOST: "idle: host work"}
"""A capture's device-time table: the row of the device's idle time charged to each kind
(``DeviceIdle``'s fields are the kinds themselves)."""

THREAD_SPANS: Mapping[TimeKind, str] = {
    INPUT: "data_wait", SYNC: "sync", COMPILE: "compile", CHECKPOINT: "checkpoint",
    DISPATCH: "dispatch"}
"""The span a capture's step record keeps the training thread's time in each kind under (a
profile's ``sync`` span is any sync the thread blocked in, lagged or forced)."""

StepTag = Literal["compile", "checkpoint", "eval", "gc", "profile", "drain", "warmup",
                  "loader_start", "slow", "fast", "attribution_shift", "outlier"]
"""The tags pipecheck itself gives a step (users may add their own with ``Monitor.tag``):
what ran in it (a compilation, a checkpoint, an eval, a garbage collection, a profiler
recording it: MaxText's ``profiler`` in ``compare --maxtext``'s R), the interval
after the last step (``drain``), a batch served from the start-up buffer (``warmup``), the
first batch of a pass over a loader (``loader_start``: a Monitor's ``batches`` called again,
its workers started again), and
an anomaly's cause (slower or faster than the steady state with no named cause, an
attribution shift, an unexplained outlier in an imported log)."""
STEP_TAGS: tuple[StepTag, ...] = typing.get_args(StepTag)

FindingKind = Literal["recompile", "input-bound", "slow-stage", "forced-sync",
                      "harmless-sync", "interference", "host-sync", "straggler",
                      "synchronized-stall", "one-host-stall", "hosts-equal",
                      "main-process-bound", "cpu-bound", "latency-bound", "limit-unclear",
                      "memory-bound", "host-bound", "periodic-stall", "slow-samples",
                      "first-batch", "loader-restart", "storage-bound"]
"""What a finding is about: a recompilation; a loader slower than compute (and what tuning
did); the pipeline stage it waits on; a host sync that holds the run back, or one that is
harmless here; real-data steps slower than both parts with no sync to explain it
(interference); a Monitor run's host sync; across hosts, a straggler, all hosts stalling
together, one host stalling, or hosts equal; what limits a loader setting (why more
workers stop helping: the training process, the cores, latency, not sure which of the
last two, or memory); a device waiting for the host to dispatch its work (profile); slow
steps recurring with a period (``analysis.periodic_stall``); a few elements of the
pipeline's expensive stage costing many times the rest (``analysis.loader.slow_samples``); a
first batch that could have been prepared during start-up (``analysis.first_batch``); a loader
started again each pass (epoch) at a material cost (``analysis.first_batch``); loading that
waits on storage (latency per read), not CPU work (``analysis.loader.storage``)."""
FINDING_KINDS: tuple[FindingKind, ...] = typing.get_args(FindingKind)
