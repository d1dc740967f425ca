"""Find the line of code that forces a host-device sync, by sampling the main thread.

A helper thread reads the main thread's stack every few milliseconds
(``sys._current_frames``). A sample counts as *blocked in a device-to-host
wait* when either

- JAX's own conversion/wait functions are on the stack (``float(x)``,
  ``print(x)``, ``x.item()``, ``jax.device_get``, ``jax.block_until_ready``
  all pass through ``jax/_src/array.py:_value`` or ``api.py``), or
- the innermost Python frame is user code executing a call that blocks inside
  C++ without a Python frame of JAX's (``np.asarray(x)``,
  ``x.block_until_ready()``): the expression being executed is read from the
  code object's positions, and its operand (``x``) looked up in the frame: a call whose
  operand is a host value (a NumPy array, a PIL image) is host work, not a wait for the
  device (``np.array(img, dtype=np.float32)`` decoding an image in a data generator).

The time between samples is charged to the nearest frame outside JAX, NumPy,
the standard library and pipecheck's own machinery: the user's file and line.
pipecheck's own lagged sync (waiting for the *previous* step) is reported
apart, as expected. Classification is a pure function of a stack summary, so
it is tested without threads or timing.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import linecache
import os
import re
import sys
import sysconfig
import threading
import time
import types
from types import CodeType, FrameType
from typing import Callable, Sequence

from pipecheck.measure.faults import Faults
from pipecheck.records.common import SyncSite

DEFAULT_INTERVAL_S = 0.003
"""Sampling period: a few ms resolves syncs that cost a few percent of a 20 ms+ step."""

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKLOADS_DIR = os.path.join(_PKG_DIR, "workloads")
_PATHS = sysconfig.get_paths()
_STDLIB_DIRS = tuple({os.path.abspath(_PATHS[k]) for k in ("stdlib", "platstdlib")})

LIBRARY_MARKERS = (
    f"{os.sep}jax{os.sep}",
    f"{os.sep}jaxlib{os.sep}",
    f"{os.sep}numpy{os.sep}",
)
"""Path fragments of libraries a sync passes through on its way from the user's line."""

WAIT_FUNCTIONS = {
    ("jax/_src/array.py", "_value"),
    ("jax/_src/array.py", "block_until_ready"),
    ("jax/_src/array.py", "__array__"),
    ("jax/_src/api.py", "block_until_ready"),
    ("jax/_src/api.py", "try_to_block"),
    ("jax/_src/api.py", "device_get"),
    ("jax/_src/api.py", "_device_get"),
    ("jax/_src/numpy/array_methods.py", "_item"),
}
"""(path suffix, function) pairs in which a thread waits for the device."""

BLOCKING_CALL_RE = re.compile(
    r"(\.block_until_ready\s*\(|\bnp\.asarray\s*\(|\bnp\.array\s*\(|\bnumpy\.asarray\s*\("
    r"|\bjax\.device_get\s*\(|\.item\s*\(|\.tolist\s*\()"
)
"""Calls that block in C++ with no JAX frame on the stack, read from the executing expression."""


@dataclasses.dataclass(frozen=True)
class FrameInfo:
    """What the classifier needs of one frame (innermost first in a stack)."""

    filename: str
    lineno: int
    function: str
    expression: str = ""
    """The source of the expression being executed (innermost frame only)."""
    operand: str = ""
    """What the blocking call of ``expression`` converts or waits on, looked up in the frame:
    ``device`` (a jax.Array, or a container holding one), ``host`` (any other value), or
    empty (not looked up, or not resolvable without running code)."""


def _norm(path: str) -> str:
    return path.replace("\\", "/")


@functools.lru_cache(maxsize=4096)
def is_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    if any(m in path for m in LIBRARY_MARKERS):
        return True
    if "site-packages" in path or "dist-packages" in path:
        return False
    return path.startswith(_STDLIB_DIRS) or filename.startswith("<frozen")


@functools.lru_cache(maxsize=4096)
def is_internal(filename: str) -> bool:
    """pipecheck's machinery (not its workloads, which stand for user code)."""
    path = os.path.abspath(filename)
    return path.startswith(_PKG_DIR + os.sep) and not path.startswith(_WORKLOADS_DIR + os.sep)


def _in_wait_function(frame: FrameInfo) -> bool:
    path = _norm(frame.filename)
    return any(path.endswith(suffix) and frame.function == fn for suffix, fn in WAIT_FUNCTIONS)


def classify(stack: Sequence[FrameInfo]) -> tuple[FrameInfo, bool] | None:
    """Is this stack (innermost first) waiting for the device? If so, where, and is it ours?

    Returns ``(site_frame, internal)`` or None.
    """
    if not stack:
        return None
    waiting = False
    i = 0
    while i < len(stack) and is_library(stack[i].filename):
        if _in_wait_function(stack[i]):
            waiting = True
        i += 1
    if i >= len(stack):
        return None
    site = stack[i]
    if not waiting:
        if i != 0 or not executing_blocking_call(site.expression) or site.operand == HOST:
            return None
    return site, is_internal(site.filename)


DEVICE, HOST = "device", "host"
"""``FrameInfo.operand``'s values."""

CONVERTING_FUNCTIONS = frozenset({"np.asarray", "np.array", "numpy.asarray", "numpy.array",
                                  "jax.device_get"})
"""Functions whose first argument is the value ``BLOCKING_CALL_RE`` waits on."""

WAITING_METHODS = frozenset({"item", "tolist", "block_until_ready"})
"""Methods that wait on the value they are called on."""

CONTAINER_LEAVES = 64
"""The most elements of a list, tuple or dict looked at for a device value."""


@functools.lru_cache(maxsize=1024)
def executing_blocking_call(expression: str) -> bool:
    """Pure: whether the executing ``expression`` is itself a blocking call (its callee is
    one of ``BLOCKING_CALL_RE``). An expression that only contains one (``np.array(img) /
    255.0`` at its division) is past that call, which has returned; one that does not parse
    (a fragment) is judged by the text alone."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return bool(BLOCKING_CALL_RE.search(expression))
    return isinstance(node, ast.Call) and bool(
        BLOCKING_CALL_RE.search(ast.unparse(node.func) + "("))


@functools.lru_cache(maxsize=1024)
def blocking_operand(expression: str) -> ast.expr | None:
    """Pure: the operand of the blocking call ``expression`` is (``x`` of ``np.asarray(x)``
    or ``x.item()``), or None when the expression is not such a call."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in WAITING_METHODS:
        return func.value
    if ast.unparse(func) in CONVERTING_FUNCTIONS and node.args:
        return node.args[0]
    return None


_UNRESOLVED = object()


def _resolve(node: ast.expr, frame: FrameType) -> object:
    """The value of a name, a constant subscript of a dict/list/tuple, or a module's
    attribute, read from ``frame`` without running any of the user's code (no property,
    no ``__getitem__`` of the user's classes); ``_UNRESOLVED`` otherwise."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in scope:
                return scope[node.id]
        return _UNRESOLVED
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = _resolve(node.value, frame)
        if type(base) in (dict, list, tuple):
            try:
                return base[node.slice.value]  # type: ignore[index]
            except (KeyError, IndexError, TypeError):
                return _UNRESOLVED
        return _UNRESOLVED
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, frame)
        if isinstance(base, types.ModuleType):
            return vars(base).get(node.attr, _UNRESOLVED)
    return _UNRESOLVED


def is_device_value(value: object) -> bool:
    """Whether ``value`` is a jax.Array, or a list, tuple or dict holding one among its first
    ``CONTAINER_LEAVES`` elements (one level deep)."""
    jax = sys.modules.get("jax")
    array = getattr(jax, "Array", None) if jax is not None else None
    if array is None:
        return False
    if isinstance(value, array):
        return True
    if type(value) is dict:
        value = list(value.values())  # type: ignore[attr-defined]
    if type(value) in (list, tuple):
        return any(isinstance(v, array) for v in value[:CONTAINER_LEAVES])  # type: ignore[index]
    return False


def operand_kind(expression: str, frame: FrameType) -> str:
    """``FrameInfo.operand`` of a frame executing ``expression``: ``device``, ``host`` or
    empty. Never raises (the sampling thread calls it)."""
    try:
        node = blocking_operand(expression)
        if node is None:
            return ""
        value = _resolve(node, frame)
        if value is _UNRESOLVED:
            return ""
        return DEVICE if is_device_value(value) else HOST
    except Exception:  # noqa: BLE001 - an odd frame: not looked up
        return ""


@functools.lru_cache(maxsize=512)
def _positions(code: CodeType) -> list[tuple[int | None, int | None, int | None, int | None]]:
    return list(code.co_positions())


def current_expression(frame: FrameType) -> str:
    """Source text of the expression ``frame`` is executing (Python 3.11+ positions)."""
    code = frame.f_code
    try:
        positions = _positions(code)
        l0, l1, c0, c1 = positions[frame.f_lasti // 2]
    except (AttributeError, IndexError, ValueError):
        return linecache.getline(code.co_filename, frame.f_lineno).strip()
    if l0 is None:
        return ""
    line = linecache.getline(code.co_filename, l0)
    if l0 == l1 and c0 is not None and c1 is not None:
        return line[c0:c1]
    return line.strip()


def stack_of(frame: FrameType | None, depth: int = 64,
             full: bool = False) -> list[FrameInfo]:
    """FrameInfo list, innermost first.

    Unless ``full``, it stops at the first frame outside the libraries: ``classify`` never
    looks further, and building fewer frames keeps each sample cheap (it holds the GIL).
    """
    out: list[FrameInfo] = []
    first = True
    while frame is not None and len(out) < depth:
        code = frame.f_code
        library = is_library(code.co_filename)
        # the expression is only read for an innermost frame of user code (classify)
        expr = current_expression(frame) if first and not library else ""
        operand = operand_kind(expr, frame) if expr and BLOCKING_CALL_RE.search(expr) else ""
        out.append(FrameInfo(code.co_filename, frame.f_lineno, code.co_name, expr, operand))
        if not library and not full:
            break
        first = False
        frame = frame.f_back
    return out


class SyncLocator:
    """Context manager sampling a thread (default: the calling one) for device waits."""

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
        thread_id: int | None = None,
        get_stack: Callable[[int], list[FrameInfo]] | None = None,
        faults: Faults | None = None,
    ) -> None:
        self.faults = faults if faults is not None else Faults()
        """Where the sampling thread's own faults go (it samples on after one)."""
        self.interval_s = interval_s
        self.clock = clock
        self.thread_id = thread_id
        self.get_stack = get_stack or self._live_stack
        self._sites: dict[tuple[str, int], list[float]] = {}
        self._info: dict[tuple[str, int], tuple[FrameInfo, bool]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self.samples = 0

    @staticmethod
    def _live_stack(thread_id: int) -> list[FrameInfo]:
        return stack_of(sys._current_frames().get(thread_id))

    def record(self, stack: Sequence[FrameInfo], dt: float) -> tuple[FrameInfo, bool] | None:
        """Charge ``dt`` seconds to the sync site of ``stack``, if it is waiting; return
        what ``classify`` found."""
        self.samples += 1
        found = classify(stack)
        if found is None:
            return None
        site, internal = found
        key = (site.filename, site.lineno)
        self._info.setdefault(key, (site, internal))
        acc = self._sites.setdefault(key, [0.0, 0])
        acc[0] += dt
        acc[1] += 1
        return found

    def _run(self) -> None:
        assert self.thread_id is not None
        last = self.clock()
        while not self._stop.wait(self.interval_s):
            now = self.clock()
            try:
                self.record(self.get_stack(self.thread_id), now - last)
            except Exception as e:  # noqa: BLE001 - the loop's thread must never see it
                self.faults.report("the sync locator", e,
                                   "the samples it failed on are not counted")
            last = now

    def __enter__(self) -> SyncLocator:
        if self.thread_id is None:
            self.thread_id = threading.get_ident()
        self.started_at = self.clock()
        self._thread = threading.Thread(target=self._run, name="pipecheck-sync-locator",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.stopped_at = self.clock()

    def sites(self) -> list[SyncSite]:
        """Sync sites, most expensive first."""
        out = []
        # a copy in one C call: the sampling thread may add a site meanwhile
        for key, (seconds, n) in list(self._sites.items()):
            frame, internal = self._info[key]
            code = frame.expression or linecache.getline(frame.filename, frame.lineno).strip()
            out.append(SyncSite(
                location=f"{frame.filename}:{frame.lineno}",
                function=frame.function,
                code=code.split("#")[0].strip(),
                seconds=float(seconds),
                samples=int(n),
                internal=internal,
            ))
        return sorted(out, key=lambda s: -s.seconds)
