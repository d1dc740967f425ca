"""Where a captured step's time went, and the verdict from it: pure functions of a timeline.

A capture (``logs.capture`` reads it) is reduced to a ``CaptureTimeline``: the device's op
intervals, the training thread's events (Python frames ``$file.py:LINE function``, JAX's
C++ events such as ``PjitFunction(train_step)``), and the step markers. For every step:

- **device busy**: the union of the device's op intervals inside the step (on CPU the XLA
  executor threads' ops, on GPU the streams' kernels, on TPU the ``XLA Ops`` line);
- **device idle**: the rest of the step, each idle stretch charged to what the training
  thread was doing then (``THREAD_KINDS``, by the names of its events): waiting for input,
  blocked on a sync, compiling, checkpointing, dispatching, or other host work;
- the training thread's time in input and in syncs, whether or not the device was idle.

The verdict applies ``analysis.verdict.decide``, compare's rule, to three estimates read
off the capture: T, the device's busy time per step (compute); D, the loader's time per
batch (the training thread's input time when loading runs on it; the step time in the
steps where the thread had to wait for a background loader, Grain workers or threads,
since such a loader had the whole step, syncs included, to deliver and did not); and R, the
step time; with the sync share the time the thread sat blocked in the user's syncs.
A device idle most of a step while the thread only dispatches is host-bound (verdict
``host-bound``, shown as ``host-bound (dispatch)``; ``analysis.verdict.dispatch_bound``):
the device waits for the host to launch work (XProf's "kernel launch").
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Mapping, Sequence

import numpy as np

from pipecheck.analysis.verdict import (  # noqa: F401 - DISPATCH_* read as ap.DISPATCH_*
    DISPATCH_BOUND_SHARE,
    DISPATCH_MIN_CALLS,
    FORCED_SYNC_EVIDENCE,
    FORCED_SYNC_MARGIN,
    Verdict,
    decide,
    dispatch_bound,
    host_bound_verdict,
)
from pipecheck.errors import CaptureError
from pipecheck.records.common import Estimate
from pipecheck.records.kinds import (
    CHECKPOINT,
    COMPILE,
    COMPUTE_BOUND,
    DISPATCH,
    FORCED_SYNC,
    HOST,
    HOST_BOUND,
    INPUT,
    INPUT_BOUND,
    SYNC,
    TimeKind,
    verdict_text,
)
from pipecheck.units import ms

THREAD_KINDS: tuple[TimeKind, ...] = (INPUT, CHECKPOINT, COMPILE, SYNC, DISPATCH)
"""What the training thread can be doing (``records.kinds.TimeKind``), in priority order:
where events of several kinds cover the same instant (a compilation inside a dispatch, a
sync inside a generator), the first one listed counts. Anything else is ``host`` work."""

_PATTERNS = {
    INPUT: re.compile(r"^data_wait$|^device_put$|^\$builtins next$|\s__next__$|"
                      r"\sload_next_batch$|^DevicePut$|device_put|TransferToDevice|\sget_next$"),
    CHECKPOINT: re.compile(r"checkpoint|orbax", re.IGNORECASE),
    COMPILE: re.compile(r"backend_compile|compile_or_get_cached|lower_sharding_computation|"
                        r"\scache_miss$|_pjit_lower|trace_to_jaxpr|^Compile"),
    SYNC: re.compile(r"TransferFromDevice|^BlockHostUntilReady|CopyToHost"),
    DISPATCH: re.compile(r"^PjitFunction\(|ExecuteHelper|^PJRT_LoadedExecutable_Execute|"
                         r"LoadedExecutable::Execute"),
}
"""Event names (Python frames as the tracer writes them, ``$file.py:LINE function``, and
JAX/XLA's own events) that say what the training thread is doing."""

_DEVICE_WAIT = re.compile(r"PjRtBuffer::Await$|^BlockHostUntilReady|TransferFromDevice|"
                          r"CopyToHost|^np\.asarray\(jax\.Array\)$")
"""Events of the runtime in which the host waits for a device buffer (to be computed, or
copied to the host): the mark of a host read, whatever Python call made it. Outside a
dispatch or a compilation (where the runtime waits on its own inputs), such a wait is a
sync; the Python tracer's frames around it say which call it was."""

_BLOCKING = re.compile(r"^\$threading\.py:\d+ wait$|^\$queue\.py:\d+ get$|"
                       r"^\$<unknown> acquire$|^\$connection\.py:\d+ (wait|recv|poll)|"
                       r"^\$synchronize\.py:\d+ __enter__$")
"""Frames in which the training thread waits on another thread or process: a loader that
prepares batches in the background (Grain workers or read threads, a prefetch queue)."""

_FRAME = re.compile(r"^\$(?P<file>[^\s:]+\.py):(?P<line>\d+) (?P<function>\S+)$")
"""A Python frame as the tracer names it: the file's base name and the function's
definition line."""

_LIBRARY_FILES = frozenset({
    "array.py", "profiler.py", "api.py", "pjit.py", "traceback_util.py", "dispatch.py",
    "array_methods.py", "core.py", "numpy.py", "fromnumeric.py", "_asarray.py"})
"""Base names of JAX's and NumPy's own files a sync passes through before the user's frame."""

BACKGROUND_SHARE = 0.5
"""Input time at least half spent blocked on another thread or process means a background
loader (workers, threads): the thread only waits for it, it does not load."""

WAITED_SHARE = 0.05
"""A step in which the thread waited for a background loader at least 5% of the step is
a step that loader did not deliver in time: its time per batch is at least the step."""

HOST_AHEAD_SHARE = 0.5
"""When less than half of the device's busy time falls inside the marked steps, the host ran
ahead of the device (a loop without a sync): the markers time the host's dispatching, not
the steps, and the device's executions of the train step are the steps."""

NO_INPUT_S = 1e-6
"""A step whose thread did nothing for input loaded in no measurable time: 1 us, so D is a
number the verdict can compare, not a missing sample."""

WAKE_S = 200e-6
"""A library frame returning within 200 us of the device finishing its work woke because
the device was done: far less than any host work that merely overlaps a step's end lasts
past it by chance, and more than a thread takes to wake on a loaded host."""

IDLE_COMPUTE_SHARE = 0.10
"""A device idle less than 10% of a step is kept busy: compute-bound whatever else."""


@dataclasses.dataclass(frozen=True)
class CaptureTimeline:
    """One host's capture as plain arrays, seconds from the capture's start."""

    host: str
    device: str
    """``cpu``, ``gpu`` or ``tpu``: where ``busy`` came from."""
    busy: np.ndarray
    """(n, 2) start and end of every device op (any order, may overlap)."""
    starts: np.ndarray
    ends: np.ndarray
    names: np.ndarray
    """The training thread's events: start, end, and an index into ``name_table``."""
    name_table: tuple[str, ...]
    marker_steps: np.ndarray
    marker_starts: np.ndarray
    marker_ends: np.ndarray
    """Step markers (``StepTraceAnnotation`` and any event with a ``step_num``)."""
    thread: str = ""
    """The training thread's line name."""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    module_runs: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """Executions of each XLA module on the device (``jit_NAME`` -> (n, 2) start, end),
    where the capture tells them apart."""

    @functools.cached_property
    def event_kinds(self) -> np.ndarray:
        """``event_kinds`` of this timeline, read-only, found once: finding the host reads
        walks every event in Python, and both the step split and the sync sites need them."""
        kinds = event_kinds(self)
        kinds.setflags(write=False)
        return kinds

    @property
    def python_frames(self) -> bool:
        """Whether the capture has the Python tracer's frames (``python_tracer_level``)."""
        return any(n.startswith("$") for n in self.name_table)


@dataclasses.dataclass(frozen=True)
class Steps:
    """The steps of a capture: their numbers and intervals (seconds)."""

    numbers: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    source: str
    """``markers`` or ``PjitFunction(NAME)`` (executions of the train step)."""


@dataclasses.dataclass(frozen=True)
class StepSplit:
    """Per step (arrays over the steps, seconds)."""

    steps: Steps
    busy: np.ndarray
    idle_by: Mapping[TimeKind, np.ndarray]
    """Device idle time charged to each of ``THREAD_KINDS`` and ``host``."""
    thread_by: Mapping[TimeKind, np.ndarray]
    """The training thread's time in each kind, device idle or not."""
    blocked_input: np.ndarray
    """Input time spent blocked on another thread or process."""
    compiled: np.ndarray
    """Steps in which JAX compiled (bool)."""
    calls: np.ndarray
    """Jitted calls the thread made in each step (outermost ``PjitFunction`` events)."""

    @property
    def times(self) -> np.ndarray:
        return self.steps.ends - self.steps.starts

    @property
    def idle(self) -> np.ndarray:
        return self.times - self.busy


def host_reads(t: CaptureTimeline) -> np.ndarray:
    """Mask over the thread's events: its host reads of device values, found by what they
    do, whatever the JAX version calls them (``__float__``, ``_item``, ``print``,
    ``device_get``). A read is the outermost frame of JAX's or NumPy's own code (below the
    user's frame) that either holds a wait for a device buffer (``_DEVICE_WAIT``) outside a
    dispatch or a compilation, or holds the moment the device finished its work and returns
    within ``WAKE_S`` of it (the thread slept until the device was done: a wait the runtime
    did not annotate). Without Python frames, the annotated wait itself is the read."""
    mark = np.zeros(len(t.starts), dtype=bool)
    inside_runtime = {i for i, n in enumerate(t.name_table) if classify(n) in (DISPATCH, COMPILE)}
    _, done = merge(t.busy)
    stack: list[int] = []
    for i in np.lexsort((-(t.ends - t.starts), t.starts)).tolist():
        while stack and t.ends[stack[-1]] <= t.starts[i]:
            stack.pop()
        if _woken(t, stack, i, done):
            mark[i] = True
        if _DEVICE_WAIT.search(t.name_table[t.names[i]]):
            # an annotation opened inside a frame can outlive it: only events holding the
            # whole wait enclose it
            around = [j for j in stack if t.ends[j] >= t.ends[i]]
            if not any(t.names[j] in inside_runtime for j in around):
                mark[_read_frame(t, around, i)] = True
        stack.append(i)
    return mark


def _woken(t: CaptureTimeline, stack: Sequence[int], i: int, done: np.ndarray) -> bool:
    """Whether event ``i`` is an outermost library frame that returned within ``WAKE_S``
    of the device finishing its work, having started before."""
    name = t.name_table[t.names[i]]
    if not name.startswith("$") or not _library_frame(name):
        return False
    k = np.searchsorted(done, t.ends[i], side="right") - 1
    if k < 0 or done[k] <= t.starts[i] or t.ends[i] - done[k] > WAKE_S:
        return False
    around = [j for j in stack if t.ends[j] >= t.ends[i]
              and t.name_table[t.names[j]].startswith("$")]
    return not around or not _library_frame(t.name_table[t.names[around[-1]]])


def _read_frame(t: CaptureTimeline, stack: Sequence[int], wait: int) -> int:
    """The outermost library frame enclosing ``wait`` (below pipecheck's own lagged read
    when that holds it), else ``wait``."""
    frames = [j for j in stack if t.name_table[t.names[j]].startswith("$")]
    for k, j in enumerate(frames):
        m = _FRAME.match(t.name_table[t.names[j]])
        if m and (m["file"], m["function"]) in INTERNAL_SYNCS and k + 1 < len(frames):
            return frames[k + 1]
    for j in frames:
        if _library_frame(t.name_table[t.names[j]]):
            return j
    return wait


def _library_frame(name: str) -> bool:
    """A frame of JAX's, NumPy's or Python's own code: a built-in (``$builtins print``,
    ``$numpy asarray``) or a file of ``_LIBRARY_FILES``."""
    m = _FRAME.match(name)
    return m is None or m["file"] in _LIBRARY_FILES


def event_kinds(t: CaptureTimeline) -> np.ndarray:
    """The kind of each of the thread's events, as an index into ``THREAD_KINDS``
    (``len(THREAD_KINDS)`` for host work): by name, and host reads (``host_reads``) as syncs."""
    codes = np.asarray([THREAD_KINDS.index(c) if (c := classify(n)) != HOST
                        else len(THREAD_KINDS)
                        for n in t.name_table], dtype=int)
    kinds = codes[t.names] if len(t.names) else np.zeros(0, dtype=int)
    kinds[host_reads(t)] = THREAD_KINDS.index(SYNC)
    return kinds


@functools.lru_cache(maxsize=65536)
def classify(name: str) -> TimeKind:
    """The kind of time an event of the training thread is (``host`` when none)."""
    for kind in THREAD_KINDS:
        if _PATTERNS[kind].search(name):
            return kind
    return HOST


def outermost(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Indices (in time order) of the intervals not nested in an earlier one."""
    order = np.lexsort((-ends, starts))
    keep, reach = [], -np.inf
    for i in order.tolist():
        if starts[i] >= reach:
            keep.append(i)
            reach = ends[i]
        else:
            reach = max(reach, ends[i])
    return np.asarray(keep, dtype=int)


def find_steps(t: CaptureTimeline, step_fn: str | None = None) -> Steps:
    """The steps: from the markers (each runs to the next marker's start, the last to its
    own end) unless ``step_fn`` names the train step, whose executions then delimit them
    (one step from one execution's start to the next's): on the device where the capture
    tells its executions apart (the host may dispatch far ahead of the device), else its
    calls on the training thread. With neither (no markers, no ``step_fn``) it refuses:
    ``analysis.unmarked`` picks the step, or reads the capture whole, before that."""
    if step_fn is None and len(t.marker_starts):
        order = np.argsort(t.marker_starts, kind="stable")
        starts, ends = t.marker_starts[order], t.marker_ends[order]
        ends = np.append(np.maximum(starts[1:], ends[:-1]), ends[-1:])
        marked = Steps(t.marker_steps[order], starts, ends, "markers")
        return _device_paced(t, marked) or marked
    if step_fn is None:
        raise CaptureError(
            f"{t.host}: the capture has no step markers; wrap each step in "
            "jax.profiler.StepTraceAnnotation('train', step_num=i), or name the jitted train "
            "step with --step-fn NAME" + _functions_hint(t))
    runs = t.module_runs.get(f"jit_{step_fn}")
    if runs is not None and len(runs) >= 2:
        starts = np.sort(runs[:, 0])
        return Steps(np.arange(len(starts) - 1), starts[:-1], starts[1:],
                     f"jit_{step_fn} on the device")
    wanted = f"PjitFunction({step_fn})"
    idx = [i for i, n in enumerate(t.name_table) if n == wanted]
    mask = np.isin(t.names, idx)
    calls = outermost(t.starts[mask], t.ends[mask])
    starts = np.sort(t.starts[mask][calls])
    if len(starts) < 2:
        raise CaptureError(
            f"{t.host}: --step-fn {step_fn}: the capture holds {len(starts)} call(s) of "
            f"{wanted}, at least 2 are needed" + _functions_hint(t))
    return Steps(np.arange(len(starts) - 1), starts[:-1], starts[1:], wanted)


def _device_paced(t: CaptureTimeline, marked: Steps) -> Steps | None:
    """The device's executions of the train step as the steps, when the host ran ahead of
    the device (``HOST_AHEAD_SHARE``) and one module ran once per marked step."""
    bs, be = merge(t.busy)
    total = float((be - bs).sum())
    inside = covered(bs, be, marked.ends) - covered(bs, be, marked.starts)
    n = len(marked.starts)
    if total <= 0 or inside.sum() >= HOST_AHEAD_SHARE * total or n < 2:
        return None
    fits = {m: r for m, r in t.module_runs.items() if abs(len(r) - n) <= 1 and len(r) >= 2}
    if not fits:
        return None
    name = max(fits, key=lambda m: float((fits[m][:, 1] - fits[m][:, 0]).sum()))
    starts = np.sort(fits[name][:, 0])
    return Steps(np.arange(len(starts) - 1), starts[:-1], starts[1:],
                 f"{name} on the device (the host ran ahead of it)")


def _functions_hint(t: CaptureTimeline, limit: int = 5) -> str:
    """The jitted functions the capture calls most, for a message."""
    counts: dict[str, int] = {}
    for code in t.names.tolist():
        name = t.name_table[code]
        if name.startswith("PjitFunction("):
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return ""
    top = sorted(counts, key=lambda n: -counts[n])[:limit]
    return " (jitted functions in it: " + ", ".join(
        f"{n[len('PjitFunction('):-1]} x{counts[n]}" for n in top) + ")"


def merge(intervals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of (n, 2) intervals as sorted, disjoint starts and ends."""
    if not len(intervals):
        return np.zeros(0), np.zeros(0)
    iv = intervals[np.argsort(intervals[:, 0], kind="stable")]
    starts, ends = iv[:, 0], np.maximum.accumulate(iv[:, 1])
    new = np.empty(len(iv), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > ends[:-1]
    group = np.cumsum(new) - 1
    out_end = np.zeros(int(group[-1]) + 1)
    np.maximum.at(out_end, group, ends)
    return starts[new], out_end


def covered(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time covered by the disjoint sorted intervals before each instant of ``t``."""
    t = np.asarray(t, dtype=float)
    if not len(starts):
        return np.zeros(len(t))
    lengths = ends - starts
    cum = np.concatenate([[0.0], np.cumsum(lengths)])
    j = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
    last = np.maximum(j - 1, 0)
    inside = np.where(j > 0, np.clip(t - starts[last], 0.0, lengths[last]), 0.0)
    return cum[last] + inside


def _labelled_segments(t: CaptureTimeline, steps: Steps
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint segments (start, end, kind code) covering the steps: cut at every
    boundary of a classified event and of a step, each labelled with the first kind
    (``THREAD_KINDS`` order) whose events cover it; ``len(THREAD_KINDS)`` means host work."""
    event_cat = t.event_kinds
    unions = []
    bounds = [steps.starts, steps.ends]
    for k in range(len(THREAD_KINDS)):
        sel = event_cat == k
        s, e = merge(np.column_stack([t.starts[sel], t.ends[sel]]))
        unions.append((s, e))
        bounds += [s, e]
    cuts = np.unique(np.concatenate(bounds))
    cuts = cuts[(cuts >= steps.starts.min()) & (cuts <= steps.ends.max())]
    a, b = cuts[:-1], cuts[1:]
    mid = (a + b) / 2
    label = np.full(len(mid), len(THREAD_KINDS))
    for k in reversed(range(len(THREAD_KINDS))):
        s, e = unions[k]
        if len(s):
            j = np.searchsorted(s, mid, side="right") - 1
            inside = (j >= 0) & (mid < e[np.maximum(j, 0)])
            label[inside] = k
    return a, b, label


def split_steps(t: CaptureTimeline, steps: Steps) -> StepSplit:
    """Device busy and idle per step, the idle charged to what the thread was doing."""
    bs, be = merge(t.busy)
    busy = covered(bs, be, steps.ends) - covered(bs, be, steps.starts)
    a, b, label = _labelled_segments(t, steps)
    seg_busy = covered(bs, be, b) - covered(bs, be, a)
    step_of = np.searchsorted(steps.starts, (a + b) / 2, side="right") - 1
    ok = (step_of >= 0) & ((a + b) / 2 < steps.ends[np.maximum(step_of, 0)])
    n = len(steps.starts)
    names = (*THREAD_KINDS, HOST)
    idle_by, thread_by = {}, {}
    for k, name in enumerate(names):
        sel = ok & (label == k)
        idle_by[name] = np.bincount(step_of[sel], weights=np.maximum(b - a - seg_busy, 0.0)[sel],
                                    minlength=n)
        thread_by[name] = np.bincount(step_of[sel], weights=(b - a)[sel], minlength=n)
    blocked = _blocked_input(t, steps)
    compiled = _compiled(t, steps)
    return StepSplit(steps, busy, idle_by, thread_by, blocked, compiled, _calls(t, steps))


def _calls(t: CaptureTimeline, steps: Steps) -> np.ndarray:
    idx = [i for i, n in enumerate(t.name_table) if n.startswith("PjitFunction(")]
    mask = np.isin(t.names, idx)
    s, e = t.starts[mask], t.ends[mask]
    top = s[outermost(s, e)] if len(s) else s
    k = np.searchsorted(steps.starts, top, side="right") - 1
    ok = (k >= 0) & (top < steps.ends[np.maximum(k, 0)])
    return np.bincount(k[ok], minlength=len(steps.starts))


def _per_step(steps: Steps, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Time covered by the union of the intervals inside each step."""
    s, e = merge(np.column_stack([starts, ends]))
    return covered(s, e, steps.ends) - covered(s, e, steps.starts)


def _blocked_input(t: CaptureTimeline, steps: Steps) -> np.ndarray:
    idx = [i for i, n in enumerate(t.name_table) if _BLOCKING.search(n)]
    mask = np.isin(t.names, idx)
    return _per_step(steps, t.starts[mask], t.ends[mask])


def _compiled(t: CaptureTimeline, steps: Steps) -> np.ndarray:
    idx = [i for i, n in enumerate(t.name_table) if classify(n) == COMPILE]
    mask = np.isin(t.names, idx)
    return _per_step(steps, t.starts[mask], t.ends[mask]) > 0


@dataclasses.dataclass(frozen=True)
class SyncCall:
    """Where the training thread blocked on the device: the user's function holding the
    sync (file base name and definition line, from the tracer) and the sync's kind."""

    file: str
    def_line: int
    function: str
    sync: str
    """The sync's own event, e.g. ``__float__`` or ``block_until_ready``."""
    seconds: float
    count: int

    @property
    def internal(self) -> bool:
        """pipecheck's own lagged sync (its loop and the Monitor read the previous step's
        loss): expected, not a problem."""
        return (self.file, self.function) in INTERNAL_SYNCS


INTERNAL_SYNCS = frozenset({("loop.py", "read_scalar")})
"""(file, function) of pipecheck's own lagged sync."""


def sync_calls(t: CaptureTimeline, steps: Steps, steady: np.ndarray) -> list[SyncCall]:
    """The user's functions that blocked on the device in the steady steps, costliest
    first. Each outermost sync event is charged to the nearest enclosing Python frame
    outside JAX and NumPy (``file.py:?? <loop>`` when the loop itself holds it: the
    tracer records only functions entered after the capture started)."""
    order = np.lexsort((-(t.ends - t.starts), t.starts))
    is_sync = t.event_kinds == THREAD_KINDS.index(SYNC)
    lo, hi = steps.starts[steady], steps.ends[steady]
    stack: list[tuple[float, int]] = []
    found: dict[tuple[str, int, str, str], list[float]] = {}
    for i in order.tolist():
        s, e, name = t.starts[i], t.ends[i], t.name_table[t.names[i]]
        while stack and stack[-1][0] <= s:
            stack.pop()
        if is_sync[i] and not any(is_sync[j] for _, j in stack):
            k = np.searchsorted(lo, s, side="right") - 1
            if k >= 0 and s < hi[k]:
                # an annotation opened inside a frame can outlive it: only frames still
                # open at the sync's start enclose it
                key = _holder(t, [j for end, j in stack if end > s], name)
                found.setdefault(key, []).append(e - s)
        stack.append((e, i))
    calls = [SyncCall(f, line, fn, sync, float(sum(v)), len(v))
             for (f, line, fn, sync), v in found.items()]
    return sorted(calls, key=lambda c: -c.seconds)


def _holder(t: CaptureTimeline, stack: Sequence[int], sync_name: str) -> tuple[str, int, str, str]:
    sync = sync_name.split()[-1] if sync_name.startswith("$") else sync_name
    for j in reversed(stack):
        m = _FRAME.match(t.name_table[t.names[j]])
        if m and m["file"] not in _LIBRARY_FILES:
            return m["file"], int(m["line"]), m["function"], sync
    return "", 0, "<loop>", sync


@dataclasses.dataclass(frozen=True)
class ProfileEstimates:
    """T, D and R read off the capture (see the module docstring), with the sync share."""

    compute: Estimate
    loader: Estimate
    step: Estimate
    sync_share: float
    background_loader: bool
    idle_share: float
    dispatch_idle_share: float
    """Median share of a step the device sat idle while the thread dispatched jitted calls
    or ran other Python between them."""
    calls_per_step: float
    """Median number of jitted calls (``PjitFunction``) the thread made per step."""
    data_wait: Estimate | None = None
    """The training thread's time in input per step (what a straggler host shows)."""
    paired_excess: Estimate | None = None
    """Per step, its time over the slower of its device busy time and its loader time: the
    step against its own parts (a busy machine slows all three together)."""


def estimates(bd: StepSplit, steady: np.ndarray) -> ProfileEstimates:
    """The three estimates over the steady steps."""
    times = bd.times[steady]
    input_time = bd.thread_by[INPUT][steady]
    blocked = bd.blocked_input[steady]
    background = bool(input_time.sum() > 0 and blocked.sum() >= BACKGROUND_SHARE
                      * input_time.sum())
    if background:
        loader = np.where(input_time >= WAITED_SHARE * times, times, input_time)
    else:
        loader = input_time
    med = float(np.median(times)) if len(times) else float("nan")
    idle = bd.idle[steady]
    loader = np.maximum(loader, NO_INPUT_S)
    bound = np.maximum(np.maximum(bd.busy[steady], loader), 1e-12)
    return ProfileEstimates(
        compute=Estimate.of(bd.busy[steady].tolist()),
        loader=Estimate.of(loader.tolist()),
        step=Estimate.of(times.tolist()),
        sync_share=float(np.median(bd.thread_by[SYNC][steady]) / med) if med > 0 else 0.0,
        background_loader=background,
        idle_share=float(np.median(idle / np.maximum(times, 1e-12))) if len(times) else 0.0,
        dispatch_idle_share=float(np.median(bd.idle_by[DISPATCH][steady]
                                            + bd.idle_by[HOST][steady]) / med)
        if med > 0 else 0.0,
        calls_per_step=float(np.median(bd.calls[steady])) if len(times) else 0.0,
        paired_excess=Estimate.of((times / bound).tolist()) if len(times) else None,
        data_wait=Estimate.of(input_time.tolist()),
    )


def _paired_forced_sync(e: ProfileEstimates) -> bool:
    """compare's forced-sync rule on the steps paired with their own parts: each step's
    time over the slower of its compute and loading, whole interval above the margin, with
    the user's syncs as evidence."""
    p = e.paired_excess
    return (p is not None and p.usable and e.compute.usable and e.loader.usable
            and p.low > 1.0 + FORCED_SYNC_MARGIN and e.sync_share >= FORCED_SYNC_EVIDENCE)


def profile_verdict(e: ProfileEstimates) -> Verdict:
    """compare's verdict on the capture's estimates, host-bound first: the device idle most
    of each step while the thread only dispatches (``analysis.verdict.dispatch_bound``)."""
    if dispatch_bound(e.idle_share, e.dispatch_idle_share, e.calls_per_step):
        return host_bound_verdict(
            f"the device is idle {100 * e.idle_share:.0f}% of each {ms(e.step.value)} step "
            f"while the host dispatches work ({ms(e.compute.value)} of device work a step)",
            e.step.value, e.compute.value)
    v = decide(e.compute, e.loader, e.step, sync_share=e.sync_share, parts_of_real=True)
    if v.verdict != FORCED_SYNC and _paired_forced_sync(e):
        excess = e.step.value / max(e.compute.value, e.loader.value) - 1.0
        v = Verdict(
            FORCED_SYNC,
            f"real-data steps ({ms(e.step.value)}) are {100 * excess:.0f}% slower than the "
            f"slower of compute ({ms(e.compute.value)}) and loading ({ms(e.loader.value)}), "
            "step by step: the host waits for the device somewhere", excess)
    if v.verdict != COMPUTE_BOUND and e.idle_share < IDLE_COMPUTE_SHARE and e.step.usable:
        # a device kept busy is the bound, whatever the intervals could not separate
        return Verdict(COMPUTE_BOUND,
                       f"the device is busy {100 * (1 - e.idle_share):.0f}% of each "
                       f"{ms(e.step.value)} step: compute ({ms(e.compute.value)}/step) is the "
                       f"slower part; the loader gives a batch in {ms(e.loader.value)}",
                       v.excess_over_bound)
    return v


def profile_recommendation(verdict: Verdict, e: ProfileEstimates,
                           sync_text: str | None) -> str:
    """One sentence: what to do first (compare's texts where the verdict is the same)."""
    if verdict.verdict == HOST_BOUND:
        return (f"{verdict_text(HOST_BOUND)}: fuse the small jitted calls into one jitted step "
                "(jax.jit the whole update, jax.lax.scan over micro-steps) so the device is "
                "not waiting for Python to launch each one")
    if verdict.verdict == FORCED_SYNC:
        if sync_text:
            return f"remove the forced sync: {sync_text}. Log the previous step's loss instead."
        return ("the host waits for the device somewhere outside the loop's own sync; capture "
                "with python_tracer_level=1 (the default) to name it, or run your loop under "
                "pipecheck.Monitor")
    if verdict.verdict == INPUT_BOUND:
        where = ("its background workers do not keep up" if e.background_loader else
                 "loading runs on the training thread")
        return (f"input-bound: the device waits for input each step ({where}); run pipecheck "
                "compare (or pipecheck dataloader) on your pipeline to find the Grain workers "
                "and read threads that keep up, or preprocess offline")
    if verdict.verdict == COMPUTE_BOUND:
        return ("compute-bound: the input pipeline keeps up; speed up the model step (larger "
                "batch, better sharding, mixed precision)")
    return verdict.reason
