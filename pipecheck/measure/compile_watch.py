"""Count and explain compilations of the train step.

``jax.monitoring`` reports trace, lowering and backend-compile durations with
the function's name; JAX's ``jax_explain_cache_misses`` logs *why* a traced
function missed its cache (which argument differed, and how). A
``CompileWatcher`` collects both while it is active and turns every
compilation after the first into a finding that names the argument and the fix.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Callable

from pipecheck.analysis.recompile_advice import FIXES, recompile_fix
from pipecheck.measure.faults import Faults
from pipecheck.records.common import Finding
from pipecheck.records.events import CompileEvent

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    BACKEND_COMPILE_EVENT,
)
_EXPLAIN_LOGGER = "jax._src.interpreters.partial_eval"

_lock = threading.Lock()
_active: list[CompileWatcher] = []
_listener_installed = False


def _listener(event: str, duration_secs: float, **kwargs: object) -> None:
    if event not in COMPILE_EVENTS:
        return
    fun_name = str(kwargs.get("fun_name", ""))
    with _lock:
        watchers = list(_active)
    for w in watchers:
        try:
            w._on_event(event, fun_name, duration_secs)
        except Exception as e:  # noqa: BLE001 - raised here, it would end the user's jit call
            w.faults.report("the compilation listener", e,
                            "compilations from then on may be missing from the record")


def _install_listener() -> None:
    global _listener_installed
    with _lock:
        if _listener_installed:
            return
        # lazy: JAX imported where used, so `import pipecheck` stays light
        import jax

        jax.monitoring.register_event_duration_secs_listener(_listener)  # type: ignore[arg-type]
        _listener_installed = True


class _ExplainHandler(logging.Handler):
    def __init__(self, watcher: CompileWatcher) -> None:
        super().__init__(level=logging.WARNING)
        self.watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.watcher._on_explanation(record.getMessage())
        except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
            self.watcher.faults.report("the recompile explainer", e,
                                       "a recompile's explanation may be missing")


def _matches(fun_name: str, name: str | None) -> bool:
    return name is not None and fun_name in (name, f"jit({name})", f"pjit({name})")


_DIFF_RE = re.compile(
    r"\*\s+at\s+(?P<arg>.+?),\s+now\s+(?P<now>.+?)\s+and before\s+(?P<before>.+?)$"
)
_TYPE_RE = re.compile(
    r"^(?P<dtype>[a-z]+[0-9]*(?:<[^>]*>)?)\[(?P<shape>[^\]]*)\](?P<rest>.*)$")
"""A JAX abstract type as explanations print it: ``f32[64,32]({})``, a typed key
``key<fry>[]({})``, a dimension sharded over a mesh axis ``f32[4@data,4]({Explicit: ...})``."""
_AXIS_RE = re.compile(r"@[^,\]]*")


_WEAK_RE = re.compile(r"weak_type=(True|False)")


def describe_difference(now: str, before: str) -> str:
    """Classify how two JAX abstract types differ: sharding, shape, dtype or weak type."""
    m_now, m_before = _TYPE_RE.match(now), _TYPE_RE.match(before)
    if not m_now or not m_before:
        return "type"
    if m_now["dtype"] != m_before["dtype"]:
        return "dtype"
    if _AXIS_RE.sub("", m_now["shape"]) != _AXIS_RE.sub("", m_before["shape"]):
        return "shape"
    if m_now["shape"] != m_before["shape"]:
        return "sharding"  # the same shape, split over other mesh axes
    weak_now, weak_before = _WEAK_RE.findall(now), _WEAK_RE.findall(before)
    if weak_now != weak_before:
        return "weak type"
    if m_now["rest"] != m_before["rest"]:
        return "sharding"
    return "type"


def explanation_findings(messages: list[str], fun_label: str, compiles: int) -> list[Finding]:
    """Turn JAX's cache-miss explanations into findings (one per differing argument)."""
    findings: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for msg in messages:
        for line in msg.splitlines():
            m = _DIFF_RE.search(line.strip())
            if not m:
                continue
            arg, now = m["arg"], m["now"]
            before = re.sub(r"https?://\S+$", "", m["before"])
            what = describe_difference(now, before)
            if (arg, what) in seen:
                continue
            seen.add((arg, what))
            findings.append(Finding(
                kind="recompile",
                message=(
                    f"{fun_label} compiled {compiles} times: argument {arg} changed {what} "
                    f"(now {now}, before {before})"
                ),
                numbers={"train_step_compiles": float(compiles)},
                location=arg,
                fix=recompile_fix(arg, what),
            ))
    if compiles > 1 and not findings:
        findings.append(Finding(
            kind="recompile",
            message=f"{fun_label} compiled {compiles} times; JAX gave no explanation",
            numbers={"train_step_compiles": float(compiles)},
            fix=FIXES["batch"]["type"],
        ))
    return findings


class CompileWatcher:
    """Context manager: compilations of every function while active; those of function
    ``name`` (the train step) are counted and explained apart (``events``), the others kept
    in ``other_events``. ``name`` may be set later (None until then: every event is other).

    ``clock`` stamps each event so a loop can tell which step interval compiled. Listening
    costs no device sync: JAX reports the durations from the host.
    """

    def __init__(self, name: str | None, clock: Callable[[], float],
                 faults: Faults | None = None) -> None:
        self.name = name
        self.clock = clock
        self.faults = faults if faults is not None else Faults()
        """Where the listener's own faults go (never raised into the compiling call)."""
        self.events: list[CompileEvent] = []
        self.other_events: list[CompileEvent] = []
        self.explanations: list[str] = []
        self.compiles = 0
        """Backend compilations of the watched function so far (a counter: a loop reads it
        every step)."""
        self._handler = _ExplainHandler(self)
        self._saved_explain: bool | None = None
        self._saved_propagate = True

    def __enter__(self) -> CompileWatcher:
        import jax

        _install_listener()
        self._saved_explain = bool(jax.config.jax_explain_cache_misses)  # type: ignore[attr-defined]
        jax.config.update("jax_explain_cache_misses", True)
        logger = logging.getLogger(_EXPLAIN_LOGGER)
        logger.addHandler(self._handler)
        self._saved_propagate = logger.propagate
        logger.propagate = False
        with _lock:
            _active.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        import jax

        with _lock:
            if self in _active:
                _active.remove(self)
        logger = logging.getLogger(_EXPLAIN_LOGGER)
        logger.removeHandler(self._handler)
        logger.propagate = self._saved_propagate
        jax.config.update("jax_explain_cache_misses", bool(self._saved_explain))

    def _on_event(self, event: str, fun_name: str, duration: float) -> None:
        ev = CompileEvent(event, fun_name, float(duration), self.clock())
        if _matches(fun_name, self.name):
            self.events.append(ev)
            if event == BACKEND_COMPILE_EVENT:
                self.compiles += 1
        else:
            self.other_events.append(ev)

    def _on_explanation(self, message: str) -> None:
        if self.name is None:
            return
        if f"for {self.name} defined at" in message or f" {self.name} id=" in message:
            self.explanations.append(message)

    @property
    def compile_s(self) -> float:
        """Seconds spent tracing, lowering and compiling the watched function."""
        return sum(e.duration_s for e in self.events)

    def findings(self) -> list[Finding]:
        return explanation_findings(self.explanations, f"jit({self.name})", self.compiles)
