"""Event lines of a MaxText log (checkpoints, orbax's async machinery, eval, profiler
windows, synchronous saves, restores, restarts) found in one line's text: a ``Pending``
event, made a ``LogEvent`` once the log's times are known (``finish``)."""

from __future__ import annotations

import dataclasses
import re
from typing import TypedDict, Unpack

from pipecheck.logs.maxtext.patterns import NUM

_SAVE = re.compile(r"Saving checkpoint at step\s*(\d+)")
_SAVED = re.compile(r"[Ss]aved a checkpoint at step\s*(\d+)")
_ASYNC = re.compile(r"Started an asynchronous checkpoint save for step\s*(\d+)")
_BG_START = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Background save thread started")
_BG_DONE = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Background save thread done\."
    rf"(?: Time taken:\s*(?P<seconds>{NUM})\s*s)?")
"""Orbax writes the thread's time on this line in recent versions, not in older ones."""
_BLOCKING_SAVE = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Initiated Pytree async_save\."
    rf" Time taken:\s*(?P<seconds>{NUM})\s*s")
"""Orbax's handler writes this on the calling (training) thread when the blocking part of
an async save ends (base_pytree_checkpoint_handler.py, ``async_save``): the state's arrays
are copied off the device and the background write is handed its futures. Orbax before
0.11.14 does not write it."""
_FINALIZED_ASYNC = re.compile(
    r"\[process=\d+\]\[thread=(?!MainThread\])[^\]]+\] Finished saving checkpoint")
"""Orbax (0.12.8 at least, ``atomicity.py``) writes ``Finished saving checkpoint (finalized
tmp dir)`` on the thread that finalizes a save: the main thread for a synchronous save, the
background thread (``async_save``) for an asynchronous one, which is no synchronous save."""
_WAIT_PREV = re.compile(rf"Waiting for previous save to complete took\s*({NUM})\s*seconds")
_WAIT_STEP = re.compile(
    rf"Waited\s*({NUM})\s*seconds for step\s*(\d+)\s*to finish before starting checkpointing"
)


# Events that are not orbax's async machinery: (kind, pattern). The first match wins. The
# ``Profiler session`` lines are the XLA profiler's own (profiler_session.cc, written on the
# profiler's thread with their own absl header): initializing/started when a capture starts,
# collecting data and tear down when it stops; save_profile.cc's lines after them (the
# capture collected and written) are the same window's, which its stop can be waiting on.
_ACTIVITY = (
    ("eval_start", re.compile(r"Running evaluation(?: on train step\s*(\d+))?|"
                              r"Starting eval after train step\s*(\d+)")),
    ("eval_end", re.compile(r"Completed eval after train step\s*(\d+)|eval metrics after step:"
                            r"\s*(\d+)")),
    ("eval_step", re.compile(r"Completed eval step:?\s*(\d+)")),
    ("profiler_boundary", re.compile(r"completed profiler activation/deactivation step:\s*(\d+)")),
    ("profiler_start", re.compile(r"Capture range started|jax\.profiler\.start_trace|"
                                  r"[Ss]tart(?:ed|ing) (?:the )?(?:jax )?profil|"
                                  r"Profiler session (?:initializing|started)")),
    ("profiler_collect", re.compile(r"Profiler session collecting data|"
                                    r"Collecting XSpace to repository|"
                                    r"Dumped (?:gzipped )?tool data")),
    ("profiler_stop", re.compile(r"Capture range ended|jax\.profiler\.stop_trace|"
                                 r"[Ss]top(?:ped|ping) (?:the )?(?:jax )?profil|"
                                 r"Profiler session tear down")),
    ("profiler_report", re.compile(r"Generat(?:ing|ed)\b.*\.(?:nsys-rep|qdstrm)|"
                                   r"\.nsys-rep$")),
    ("sync_save_start", re.compile(r"\[sync\] Started save checkpoint|Saving item to\b")),
    ("sync_save_end", re.compile(r"\[sync\] Finished save in\s*(" + NUM + r")\s*seconds|"
                                 r"Finished synchronous save|Finished saving checkpoint")),
    ("restore_start", re.compile(r"Restoring (?:item|checkpoint) from|restoring params from|"
                                 r"restoring from this run's directory")),
    ("restore_end", re.compile(r"Finished restoring checkpoint|Restored checkpoint")),
    ("restart", re.compile(r"Slice down event detected|Elastic attempt \d+|"
                           r"[Pp]reemption (?:signal|notice) received|received preemption")),
    ("hlo_dump", re.compile(r"HloModule dump enabled[^\n]*")),
)
_ACTIVITY_HINT = re.compile(
    r"evaluation|eval |Completed eval|profil|Profiler session|XSpace|tool data|Capture range|"
    r"nsys-rep|qdstrm|\[sync\]|"
    r"Saving item|synchronous save|saving checkpoint|[Rr]estor|Slice down|Elastic attempt|"
    r"reemption|HloModule dump")
"""A cheap test a line must pass before the ``_ACTIVITY`` patterns are tried."""


class EventFields(TypedDict, total=False):
    """What an event line tells beside its kind (``records.imported.LogEvent``'s fields)."""

    step: int | None
    seconds: float | None
    anchor_step: int | None


@dataclasses.dataclass
class Pending:
    """An event line read, made a ``LogEvent`` once the log's times are known."""

    kind: str
    line: int
    text: str
    timed: bool
    """Takes the time of the last header at or before its line (checkpoint lines);
    otherwise only its own header's."""
    own_header: bool
    fields: EventFields


def _event(kind: str, n: int, m: re.Match[str], own: bool, timed: bool = True,
           **fields: Unpack[EventFields]) -> Pending:
    return Pending(kind, n, m.group(0), timed, own, fields)


def checkpoint_event(line: str, n: int, own: bool) -> Pending | None:
    """The checkpoint event a line reports, if any (anchored at the last step line
    before it unless it names its step)."""
    if "heckpoint" not in line and "save" not in line and "Waited" not in line:
        return None
    for kind, pattern in (("checkpoint_save", _SAVE), ("checkpoint_saved", _SAVED),
                          ("checkpoint_async_start", _ASYNC)):
        if m := pattern.search(line):
            s = int(m.group(1))
            return _event(kind, n, m, own, step=s, anchor_step=s)
    if m := _FINALIZED_ASYNC.search(line):
        return _event("async_save_finalized", n, m, own)
    if m := _BG_START.search(line):
        return _event("async_save_started", n, m, own)
    if m := _BG_DONE.search(line):
        return _event("async_save_done", n, m, own,
                      seconds=float(m["seconds"]) if m["seconds"] else None)
    if m := _BLOCKING_SAVE.search(line):
        return _event("async_save_blocking", n, m, own, seconds=float(m["seconds"]))
    if m := _WAIT_PREV.search(line):
        return _event("checkpoint_wait_previous", n, m, own,
                      seconds=float(m.group(1)))
    if m := _WAIT_STEP.search(line):
        s = int(m.group(2))
        return _event("checkpoint_wait_step", n, m, own, step=s,
                      seconds=float(m.group(1)), anchor_step=s)
    return None


def activity_event(line: str, n: int, own: bool) -> Pending | None:
    """An eval, profiler, synchronous save, restore or restart line, if it is one;
    timed only by its own header."""
    if not _ACTIVITY_HINT.search(line):
        return None
    for kind, pattern in _ACTIVITY:
        if m := pattern.search(line):
            number = next((g for g in m.groups() if g is not None), None)
            step = seconds = None
            if number is not None and kind == "sync_save_end":
                seconds = float(number)
            elif number is not None:
                step = int(number)
            return _event(kind, n, m, own, timed=False, step=step, seconds=seconds)
    return None
