"""``Monitor.span``'s answers: the recorder's span context of each name, cached, and the
names whose spans also tag their step."""

from __future__ import annotations

import contextlib
from typing import Callable

from pipecheck.measure.spans import SpanRecorder
from pipecheck.records.kinds import CHECKPOINT, EVAL, GC, SPANS_OF

TAGGING_SPANS = frozenset(name for kind in (CHECKPOINT, EVAL, GC) for name in SPANS_OF[kind])
"""Spans that also tag their step: the time kinds of work that does not happen every step
(checkpoint, eval, gc)."""


class MonitorSpans(dict[str, contextlib.AbstractContextManager[None]]):
    """``Monitor.span``'s answers by name: the recorder's context of each name that does
    not tag its step; a tagging name is never stored, so each of its spans tags. The first
    span starts the Monitor (``start``); the cache is dropped when the recorder's contexts
    change kind (``SpanRecorder.on_switch``)."""

    def __init__(self, recorder: SpanRecorder, start: Callable[[], None]) -> None:
        super().__init__()
        self.recorder = recorder
        self.start = start
        recorder.on_switch.append(self.clear)

    def __missing__(self, name: str) -> contextlib.AbstractContextManager[None]:
        self.start()  # once per name and kind: nothing when started
        rec = self.recorder
        if name in TAGGING_SPANS:
            rec.tag(name)
            return rec.span(name)
        ctx = self[name] = rec.span(name)
        return ctx
