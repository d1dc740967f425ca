"""The timed training loop: step time from lagged syncs, never from host wall-clock.

Under async dispatch a jitted step returns long before its result exists, so
the host clock between loop iterations measures dispatch, not compute. This
loop dispatches step N, *then* waits for step N-1's loss and reads the clock:
the interval between two such readings is one step's real cost (compute,
or the input pipeline when that is slower), and the device always has the
next step queued, so the measurement does not stall the pipeline. The loop
never waits on the step it has just dispatched.

Everything that touches time is injected (``recorder.clock``, ``read_loss``,
``compiles``) so the logic is tested exactly with a simulated device.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Iterator, Sequence

from pipecheck.analysis import anomalies
from pipecheck.errors import PipelineError
from pipecheck.measure.spans import SpanRecorder
from pipecheck.records.common import StepRecord
from pipecheck.records.events import CompileEvent
from pipecheck.records.steps import StepTable
from pipecheck.step_types import Batch, PyTree, StepHook


def read_scalar(x: PyTree) -> float:
    """Default lagged sync: bring a scalar to the host (blocks until it is computed)."""
    return float(x)


@dataclasses.dataclass
class LoopOutcome:
    state: PyTree
    steps: StepTable[StepRecord]


def run_lagged_sync_loop(
    step_fn: Callable[[PyTree, Batch], tuple[PyTree, PyTree]],
    state: PyTree,
    batches: Iterator[Batch],
    n_steps: int,
    recorder: SpanRecorder,
    *,
    put: Callable[[Batch], Batch] | None = None,
    hooks: Sequence[StepHook] = (),
    compiles: Callable[[], int] = lambda: 0,
    read_loss: Callable[[PyTree], float] = read_scalar,
    loss_key: str = "loss",
) -> LoopOutcome:
    """Run ``n_steps`` of ``step_fn`` and time each one between consecutive loss syncs.

    Per iteration N: fetch batch N (``data_wait``), move it to the devices (``device_put``,
    when ``put`` is given), dispatch step N (``dispatch``; tagged ``compile`` when the step
    compiled), wait for step N-1's loss (``sync``) and close step N-1's interval, then run
    the hooks of step N.
    After the loop the last step's loss closes the last interval, tagged ``drain``: no next
    batch is fetched in it (it would understate an input-bound step): not steady state.

    Because the hooks of step N run after step N-1's loss was observed (its metrics
    flushed), a hook's cost (a checkpoint's blocking device-to-host copy) is charged to
    step N, the step that ran it, and the step after it is not made to look fast.
    """
    if n_steps < 1:
        raise ValueError("n_steps must be >= 1")
    recorder.start()
    previous_loss: PyTree = None
    for i in range(n_steps):
        with recorder.span("data_wait"):
            try:
                batch = next(batches)
            except StopIteration:
                raise PipelineError(
                    f"the input pipeline ran out after {i} batches; "
                    "repeat the dataset or ask for fewer steps"
                ) from None
        if put is not None:
            with recorder.span("device_put"):
                batch = put(batch)
        compiled_before = compiles()
        with recorder.span("dispatch", step_num=i):
            state, metrics = step_fn(state, batch)
        if compiles() != compiled_before:
            recorder.tag("compile")
        if i > 0:
            with recorder.span("sync"):
                value = read_loss(previous_loss)
            recorder.mark(value)
        for hook in hooks:  # a hook may start a capture (compare --profile): look again
            hook(i, state, metrics, recorder)
            recorder.look_for_capture()
        previous_loss = metrics[loss_key]
    with recorder.span("sync"):
        value = read_loss(previous_loss)
    recorder.tag("drain")
    recorder.mark(value)
    return LoopOutcome(state=state, steps=recorder.steps)


def compiles_per_step(
    recorder: SpanRecorder, events: Iterable[CompileEvent]
) -> dict[int, dict[str, float]]:
    """Seconds JAX spent compiling each function, by the recorder's step it ended in (for
    the steps whose marks the recorder still holds)."""
    marks = list(recorder.raw_marks)
    return anomalies.compiles_by_step(((e.fun_name, e.at, e.duration_s) for e in events),
                                      marks, recorder.marks_total - len(marks))
