"""Reading a jax.profiler capture into plain timelines
(``analysis.profile.CaptureTimeline``).

``jax.profiler.start_trace(DIR)`` writes ``DIR/plugins/profile/<run>/<host>.xplane.pb``
(one file per host) beside ``<host>.trace.json.gz``. The ``.xplane.pb`` is read with JAX's
own reader, ``jax.profiler.ProfileData`` (no TensorFlow): planes hold lines, lines hold
events with a name, a start, a duration and stats. What is taken from it:

- the device's ops: on GPU every line of the ``/device:GPU:N`` planes (one per stream), on
  TPU the ``XLA Ops`` line of the ``/device:TPU:N`` planes, on CPU the events of the XLA
  executor threads (``tf_XLA...`` lines of ``/host:CPU``) that carry an ``hlo_op`` or
  ``hlo_module`` stat;
- the training thread: the ``/host:CPU`` line holding the step markers (events with a
  ``step_num`` stat, as ``StepTraceAnnotation`` writes them), else the one calling jitted
  functions (``PjitFunction(...)``) most; all its events, Python frames included.

The trace JSON beside it (``<host>.trace.json.gz``, Chrome trace events, ``ts``/``dur`` in
microseconds) carries the same events: planes as processes (``process_name``), lines as
threads (``thread_name``), stats as ``args`` (strings). Given one, it is read with the
standard library (``json``, ``gzip``) into the same plane/line/event shape; in a folder the
``.xplane.pb`` files are read.
"""

from __future__ import annotations

import ast
import dataclasses
import gzip
import json
import os
import pathlib
from typing import Iterable, Protocol, Sequence

import numpy as np

from pipecheck.analysis.profile import CaptureTimeline, SyncCall
from pipecheck.errors import CaptureError, one_line

XPLANE_SUFFIX = ".xplane.pb"
TRACE_SUFFIX = ".trace.json.gz"

StatValue = int | float | str
"""A stat's value: an xplane's are numbers or strings; a trace JSON's args are strings."""


class XEvent(Protocol):
    """An event as ``ProfileData`` gives it (``_Event`` for a trace JSON): times in ns."""

    @property
    def name(self) -> str: ...

    @property
    def start_ns(self) -> float: ...

    @property
    def duration_ns(self) -> float: ...

    @property
    def stats(self) -> Iterable[tuple[str, StatValue]]: ...


class XLine(Protocol):
    """A line (a thread, a stream) of a plane."""

    @property
    def name(self) -> str: ...

    @property
    def events(self) -> Iterable[XEvent]: ...


class XPlane(Protocol):
    """A plane (``/host:CPU``, ``/device:GPU:0``, ...) of a capture."""

    @property
    def name(self) -> str: ...

    @property
    def lines(self) -> Iterable[XLine]: ...

    @property
    def stats(self) -> Iterable[tuple[str, StatValue]]: ...


class XSpace(Protocol):
    """A whole capture file as ``jax.profiler.ProfileData`` reads it."""

    @property
    def planes(self) -> Iterable[XPlane]: ...


def capture_files(path: str | os.PathLike[str], run: str | None = None) -> list[pathlib.Path]:
    """The files of one capture: ``path`` itself, or the run folder it is (or holds, under
    ``plugins/profile/``; one per process when it holds several start_trace folders): the
    newest run unless ``run`` names one. ``.xplane.pb`` files, else trace JSONs."""
    p = pathlib.Path(path)
    if p.is_file():
        if not p.name.endswith((XPLANE_SUFFIX, TRACE_SUFFIX)):
            raise CaptureError(f"{p} is not a profiler capture (expected a *{XPLANE_SUFFIX} or "
                               f"*{TRACE_SUFFIX} file, or the folder jax.profiler.start_trace "
                               "wrote)")
        return [p]
    if not p.is_dir():
        raise CaptureError(f"{p} does not exist")
    # a folder: the .xplane.pb files, or the trace JSONs where a run has no .xplane.pb
    suffix = XPLANE_SUFFIX if any(p.glob(f"**/*{XPLANE_SUFFIX}")) else TRACE_SUFFIX
    here = sorted(p.glob(f"*{suffix}"))
    if here and run is None:
        return here
    runs = sorted({f.parent for f in p.glob(f"**/*{suffix}")})
    if run is not None:
        runs = [r for r in runs if r.name == run]
        if not runs:
            raise CaptureError(f"{p} holds no capture run named {run!r}")
    if not runs:
        raise CaptureError(
            f"{p} holds no profiler capture (*{XPLANE_SUFFIX} or *{TRACE_SUFFIX}); give the "
            "folder passed to jax.profiler.start_trace / jax.profiler.trace, or one capture "
            "file")
    by_root: dict[pathlib.Path, list[pathlib.Path]] = {}
    for r in runs:
        by_root.setdefault(_trace_root(r), []).append(r)
    newest = [max(rs, key=lambda r: (r.name, r.stat().st_mtime)) for rs in by_root.values()]
    return sorted(f for r in newest for f in r.glob(f"*{suffix}"))


def _trace_root(run: pathlib.Path) -> pathlib.Path:
    """The folder given to start_trace for a ``<root>/plugins/profile/<run>`` folder: PATH
    may hold one per process (``DIR/process_0``, ``DIR/process_1``), each read as a host."""
    if run.parent.name == "profile" and run.parent.parent.name == "plugins":
        return run.parent.parent.parent
    return run.parent


def _host_of(path: pathlib.Path) -> str:
    """The host name the profiler gave a capture file (its name without the suffix)."""
    for suffix in (XPLANE_SUFFIX, TRACE_SUFFIX):
        if path.name.endswith(suffix):
            return path.name[:-len(suffix)]
    return path.stem


def host_labels(files: Sequence[pathlib.Path]) -> list[str]:
    """A name per file: the host name the profiler gave it, prefixed by its start_trace
    folder when two files carry the same host name (processes of one machine)."""
    stems = [_host_of(f) for f in files]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{_trace_root(f.parent).name}/{stem}" for f, stem in zip(files, stems, strict=True)]


def _load(path: pathlib.Path) -> XSpace:
    # lazy: JAX's capture reader, only for the profile command
    from jax.profiler import ProfileData

    try:
        return ProfileData.from_file(str(path))
    except Exception as e:  # JaxRuntimeError and decode errors alike
        raise CaptureError(
            f"{path} cannot be read as a profiler capture ({str(e).splitlines()[0][:120]}); "
            "it may be truncated (was the capture still being written?) or not an "
            ".xplane.pb") from None


def _device_busy(planes: Sequence[XPlane]) -> tuple[str, list[tuple[float, float]],
                                                dict[str, list[tuple[float, float]]]]:
    """The device's op intervals in ns, which kind of device they are from, and the
    executions of each XLA module (``jit_NAME``) where the capture tells them apart (TPU's
    ``XLA Modules`` line; on CPU the ops' ``hlo_module`` and ``run_id`` stats)."""
    out: list[tuple[float, float]] = []
    modules: dict[str, list[tuple[float, float]]] = {}
    for kind in ("gpu", "tpu"):
        for plane in planes:
            if not plane.name.lower().startswith(f"/device:{kind}:"):
                continue
            for line in plane.lines:
                if line.name == "XLA Modules" and plane.name.endswith(":0"):
                    for e in line.events:
                        modules.setdefault(e.name.split("(")[0], []).append(
                            (e.start_ns, e.start_ns + e.duration_ns))
                if kind == "tpu" and line.name != "XLA Ops":
                    continue
                out += [(e.start_ns, e.start_ns + e.duration_ns) for e in line.events]
        if out:
            return kind, out, modules
    runs: dict[tuple[str, int], list[float]] = {}
    for plane in planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if "XLA" not in line.name:
                continue
            for e in line.events:
                stats = dict(e.stats)
                if e.duration_ns > 0 and ("hlo_op" in stats or "hlo_module" in stats):
                    out.append((e.start_ns, e.start_ns + e.duration_ns))
                    key = (str(stats.get("hlo_module", "")), int(stats.get("run_id", 0)))
                    run = runs.setdefault(key, [e.start_ns, e.start_ns + e.duration_ns])
                    run[0] = min(run[0], e.start_ns)
                    run[1] = max(run[1], e.start_ns + e.duration_ns)
    for (module, _), (a, b) in runs.items():
        modules.setdefault(module, []).append((a, b))
    return "cpu", out, modules


def _host_lines(planes: Sequence[XPlane]) -> list[XLine]:
    return [line for plane in planes if plane.name == "/host:CPU" for line in plane.lines
            if "XLA" not in line.name]


def _scan(line: XLine) -> tuple[list[tuple[int, float, float]], int]:
    """A line's step markers and its number of jitted calls, events not kept (a capture's
    other threads can hold millions)."""
    found, calls = [], 0
    for e in line.events:
        calls += e.name.startswith("PjitFunction(")
        for key, value in e.stats:
            if key == "step_num":
                found.append((int(value), e.start_ns, e.start_ns + e.duration_ns))
                break
    return found, calls


def _env(planes: Sequence[XPlane], host: str) -> dict[str, str]:
    env = {"host": host}
    for plane in planes:
        if plane.name == "/host:metadata":
            for k, v in plane.stats:
                if k in ("jax_version", "jaxlib_version"):
                    env[k.replace("_version", "")] = str(v)
        elif plane.name.startswith("/device:") and "device_kind" not in env:
            for k, v in plane.stats:
                if k in ("device_type_string", "device_vendor"):
                    env["device_kind"] = str(v)
    return env


def read_timeline(path: pathlib.Path, host: str | None = None) -> CaptureTimeline:
    """One host's capture as a ``CaptureTimeline`` (``host``: its name; default the file's)."""
    planes: Sequence[XPlane] = (_trace_planes(path) if path.name.endswith(TRACE_SUFFIX)
                                else list(_load(path).planes))
    host = host or _host_of(path)
    device, busy, modules = _device_busy(planes)
    lines = _host_lines(planes)
    if not lines:
        raise CaptureError(f"{path} holds no host threads (/host:CPU); it is not a capture "
                           "of a JAX program's host")
    scanned = [(_scan(line), line) for line in lines]
    (markers, _), best = max(scanned, key=lambda m: (len(m[0][0]), m[0][1]))
    thread = best.name
    table: dict[str, int] = {}
    names: list[int] = []
    start_ns: list[float] = []
    dur_ns: list[float] = []
    for e in best.events:
        names.append(table.setdefault(e.name, len(table)))
        start_ns.append(e.start_ns)
        dur_ns.append(e.duration_ns)
    t0 = min(min(start_ns, default=np.inf), min((b[0] for b in busy), default=np.inf))
    t0 = 0.0 if not np.isfinite(t0) else t0
    codes = np.asarray(names, dtype=np.int64)
    starts = (np.asarray(start_ns, dtype=float) - t0) / 1e9
    ends = starts + np.asarray(dur_ns, dtype=float) / 1e9
    mk = np.asarray(markers, dtype=float).reshape(-1, 3)
    return CaptureTimeline(
        host=host, device=device,
        busy=(np.asarray(busy, dtype=float).reshape(-1, 2) - t0) / 1e9,
        starts=starts, ends=ends, names=codes, name_table=tuple(table),
        marker_steps=mk[:, 0].astype(int), marker_starts=(mk[:, 1] - t0) / 1e9,
        marker_ends=(mk[:, 2] - t0) / 1e9, thread=thread, env=_env(planes, host),
        module_runs={m: np.sort((np.asarray(r, dtype=float) - t0) / 1e9, axis=0)
                     for m, r in modules.items() if m})


@dataclasses.dataclass
class _Event:
    name: str
    start_ns: float
    duration_ns: float
    stats: list[tuple[str, StatValue]]


@dataclasses.dataclass
class _Line:
    name: str
    events: list[_Event]


@dataclasses.dataclass
class _Plane:
    name: str
    lines: list[_Line]
    stats: list[tuple[str, StatValue]]


def _trace_planes(path: pathlib.Path) -> list[_Plane]:
    """A trace JSON's events as planes, lines and events (the ``ProfileData`` shape)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        if not isinstance(events, list):
            raise TypeError("traceEvents is not a list")
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
        raise CaptureError(f"{path} cannot be read as a profiler trace JSON ({one_line(e, 120)});"
                           " it may be truncated, or not a jax.profiler trace") from None
    processes: dict[object, str] = {}  # by pid
    threads: dict[tuple[object, object], str] = {}  # by pid and tid
    lines: dict[tuple[object, object], list[_Event]] = {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        if ph == "M" and ev.get("name") == "process_name":
            processes[ev.get("pid")] = str(ev.get("args", {}).get("name", ""))
        elif ph == "M" and ev.get("name") == "thread_name":
            threads[(ev.get("pid"), ev.get("tid"))] = str(ev.get("args", {}).get("name", ""))
        elif ph == "X" and "ts" in ev:
            args = ev.get("args") or {}
            lines.setdefault((ev.get("pid"), ev.get("tid")), []).append(_Event(
                str(ev.get("name", "")), float(ev["ts"]) * 1e3, float(ev.get("dur", 0.0)) * 1e3,
                _stats(args)))
    planes: dict[object, _Plane] = {}
    for (pid, tid), evs in lines.items():
        plane = planes.setdefault(pid, _Plane(processes.get(pid, str(pid)), [], []))
        plane.lines.append(_Line(threads.get((pid, tid), str(tid)), evs))
    return list(planes.values())


def _stats(args: object) -> list[tuple[str, StatValue]]:
    """A trace event's ``args`` as stats (their values are strings; any other JSON value
    is kept as its JSON text)."""
    if not isinstance(args, dict):
        return []
    return [(str(k), v if isinstance(v, (int, float, str)) else json.dumps(v))
            for k, v in args.items()]


# --- the user's source ---------------------------------------------------------------------

SYNC_CALLS = {
    "__float__": ("float",), "__int__": ("int",), "__bool__": ("bool",),
    "__index__": ("int", "range"), "item": ("item",), "tolist": ("tolist",),
    "__array__": ("asarray", "array"), "np.asarray(jax.Array)": ("asarray", "array"),
    "block_until_ready": ("block_until_ready",), "device_get": ("device_get",),
    "_item": ("item",), "_tolist": ("tolist",), "_value": ("asarray", "array"),
}
"""The calls in the user's source that make each sync event, where the event's name is not
the call's (any other event, ``print`` or ``asarray``, is made by the call of its name)."""

MAX_SOURCE_FILES = 5000
"""Files looked at when searching a folder tree for the user's source (a home directory
must not be walked whole)."""


def find_source(file: str, search: Sequence[str | os.PathLike[str]]) -> pathlib.Path | None:
    """The first file named ``file`` in the ``search`` folders (and their subfolders)."""
    for root in search:
        seen = 0
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in (
                "site-packages", "node_modules", "__pycache__")]
            if file in filenames:
                return pathlib.Path(dirpath) / file
            seen += len(filenames)
            if seen > MAX_SOURCE_FILES:
                break
    return None


def sync_line(source: pathlib.Path, def_line: int, sync: str) -> int | None:
    """The line of the function defined at ``def_line`` that makes the ``sync`` event, when
    exactly one call in it can (else None: ambiguous, or not found)."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    names = SYNC_CALLS.get(sync, (sync,))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                node.lineno == def_line or any(d.lineno == def_line
                                               for d in node.decorator_list)):
            lines = {c.lineno for c in ast.walk(node) if isinstance(c, ast.Call)
                     and _called_name(c.func) in names}
            return lines.pop() if len(lines) == 1 else None
    return None


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def locate(call: SyncCall, search: Sequence[str | os.PathLike[str]]) -> tuple[str, str]:
    """``(location, code)`` of a sync call: ``path:line`` of the sync when the source is
    found and unambiguous, else the function's definition line."""
    if not call.file:
        return "the training loop itself", call.sync
    source = find_source(call.file, search)
    if source is not None:
        line = sync_line(source, call.def_line, call.sync)
        if line is not None:
            text = source.read_text(encoding="utf-8", errors="replace").splitlines()
            code = text[line - 1].strip() if line <= len(text) else call.sync
            return f"{source}:{line}", code
        return f"{source}:{call.def_line}", f"{call.function}() ({call.sync})"
    return f"{call.file}:{call.def_line}", f"{call.function}() ({call.sync})"
