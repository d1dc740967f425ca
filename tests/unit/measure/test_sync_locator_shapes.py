"""The sync locator on the lines a data generator really has, sampled at an exact
instruction: the stack is read (``stack_of``) from inside an opcode trace, at the moment the
frame is about to run that instruction, so no timing is involved."""

from __future__ import annotations

import dis
import sys
from types import FrameType
from typing import Callable

import numpy as np

from pipecheck.measure.sync_locator import classify, executing_blocking_call, stack_of


def stacks_at(fn: Callable[[], object], opname: str) -> list[tuple[str, object]]:
    """Run ``fn`` and, at each instruction ``opname`` of its own frame, the expression the
    locator reads there and what ``classify`` makes of the stack (by ``sys.monitoring``'s
    instruction events where Python has them: 3.12's ``settrace`` gives no opcode events to
    a frame that asks for them in its call event)."""
    code = fn.__code__
    ops = {i.offset: i.opname for i in dis.get_instructions(code)}
    seen: list[tuple[str, object]] = []

    def look(frame: FrameType) -> None:
        stack = stack_of(frame)
        seen.append((stack[0].expression, classify(stack)))

    if hasattr(sys, "monitoring"):
        return _stacks_by_monitoring(fn, lambda offset: ops.get(offset) == opname, look, seen)

    def trace(frame: FrameType, event: str, arg: object):  # noqa: ANN202
        if frame.f_code is not code:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode" and ops.get(frame.f_lasti) == opname:
            look(frame)
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return seen


def _stacks_by_monitoring(fn: Callable[[], object], wanted: Callable[[int], bool],
                          look: Callable[[FrameType], None],
                          seen: list[tuple[str, object]]) -> list[tuple[str, object]]:
    monitoring = sys.monitoring  # type: ignore[attr-defined]
    tool = monitoring.DEBUGGER_ID
    code = fn.__code__

    def on_instruction(executing: object, offset: int) -> None:
        if executing is code and wanted(offset):
            look(sys._getframe(1))

    monitoring.use_tool_id(tool, "pipecheck-test")
    try:
        monitoring.register_callback(tool, monitoring.events.INSTRUCTION, on_instruction)
        monitoring.set_local_events(tool, code, monitoring.events.INSTRUCTION)
        fn()
    finally:
        monitoring.set_local_events(tool, code, 0)
        monitoring.register_callback(tool, monitoring.events.INSTRUCTION, None)
        monitoring.free_tool_id(tool)
    return seen


def test_the_conversion_call_of_a_host_image_is_not_a_sync() -> None:
    img = np.zeros((8, 8, 3), np.uint8)

    def convert() -> object:
        return np.array(img, dtype=np.float32)

    seen = [(e, c) for e, c in stacks_at(convert, "CALL") if e.startswith("np.array(")]
    assert seen and all(c is None for _, c in seen), seen


def test_arithmetic_on_a_host_conversion_is_not_a_sync() -> None:
    img = np.zeros((8, 8, 3), np.uint8)

    def convert_and_scale() -> object:
        return np.array(img, dtype=np.float32) / 255.0

    seen = stacks_at(convert_and_scale, "BINARY_OP")
    assert seen and seen[0][0] == "np.array(img, dtype=np.float32) / 255.0"
    assert all(c is None for _, c in seen), seen


def test_executing_blocking_call_is_the_call_itself_not_an_expression_holding_one() -> None:
    assert executing_blocking_call("np.asarray(x)")
    assert executing_blocking_call("loss.item()")
    assert executing_blocking_call("jax.block_until_ready(state)")
    assert not executing_blocking_call("np.array(img, dtype=np.float32) / 255.0")
    assert not executing_blocking_call("print(np.asarray(x))")
    assert executing_blocking_call("np.asarray(x")  # a fragment: by its text
