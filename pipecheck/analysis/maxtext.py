"""MaxText training logs as pipecheck records (``pipecheck import``, kind ``imported``).

Only the lines that matter are read; everything else is ignored. Lines may carry a glog
header (``I0312 09:14:27.118203 140233 train.py:196] ...``) and may be interleaved with
lines from other threads and processes, so every pattern is searched for anywhere in a
line and nothing depends on two lines being adjacent, except ``Per train step:``, whose
``Total TFLOPs`` arrives on a later line.

The steady state is every logged step except the first (it includes compilation) and the
steps that ``stats.robust_outliers`` finds far from the median. Each of those anomalies
gets a likely cause from the events around it (``explain_anomalies``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import pathlib
import re
from typing import Any, Callable, Iterable, Iterator, Sequence, TextIO

import numpy as np

from pipecheck.analysis import stats
from pipecheck.errors import ResultFormatError
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.common import Distribution
from pipecheck.records.imported import Anomaly, ImportedRun, LogEvent, LogMemory, LogStep
from pipecheck.records.steps import StepTable, StepTableBuilder, column_of


class LogFormatError(ResultFormatError):
    """A file that cannot be read as a MaxText training log (unreadable, no step lines)."""


# --- causes of anomalous steps ---------------------------------------------------------
CAUSE_COMPILATION = "compilation"
CAUSE_CHECKPOINT = "checkpoint stall"
CAUSE_ATTRIBUTION = "attribution shift"
CAUSE_UNEXPLAINED = "unexplained"

CAUSE_TAGS = {
    CAUSE_COMPILATION: "compile",
    CAUSE_CHECKPOINT: "checkpoint",
    CAUSE_ATTRIBUTION: "attribution_shift",
    CAUSE_UNEXPLAINED: "outlier",
}
"""The tag an anomalous step carries in ``steps`` (``compile`` and ``checkpoint`` are the
tags pipecheck's own runs use for the same causes)."""

CHECKPOINT_STALL_WINDOW = 2
"""A slow step at most this many steps after a checkpoint event's step is a checkpoint stall.
The save of step S runs after step S is dispatched, so its cost lands in step S+1 or S+2."""

CHECKPOINT_EVENTS = (
    "checkpoint_save", "checkpoint_async_start", "checkpoint_wait_previous", "checkpoint_wait_step",
)

# --- line patterns ---------------------------------------------------------------------
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
GLOG_HEADER = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+:\d+\]\s?")
_STEP = re.compile(r"completed step:\s*(\d+)\s*,(.*)")
_PARAMS = re.compile(rf"number parameters:\s*({_NUM})\s*billion")
_JAX = re.compile(r"System Information: Jax Version:\s*(\S+)")
_JAXLIB = re.compile(r"System Information: Jaxlib Version:\s*(\S+)")
_BACKEND = re.compile(r"System Information: Jax Backend:\s*(.*\S)")
_TOTAL_MEM = re.compile(rf"Total memory size:\s*({_NUM})\s*GB")
_OUTPUT_MEM = re.compile(rf"Output size:\s*({_NUM})\s*GB")
_TEMP_MEM = re.compile(rf"Temp size:\s*({_NUM})\s*GB")
_USING = re.compile(rf"Using \(GB\)\s*({_NUM})\s*/\s*({_NUM})")
_SAVE = re.compile(r"Saving checkpoint at step\s*(\d+)")
_ASYNC = re.compile(r"Started an asynchronous checkpoint save for step\s*(\d+)")
_WAIT_PREV = re.compile(rf"Waiting for previous save to complete took\s*({_NUM})\s*seconds")
_WAIT_STEP = re.compile(
    rf"Waited\s*({_NUM})\s*seconds for step\s*(\d+)\s*to finish before starting checkpointing"
)
_PER_STEP = re.compile(r"Per train step:")
_TOTAL_TFLOPS = re.compile(rf"Total TFLOPs:\s*({_NUM})")
_CONFIG = re.compile(r"Config param\s+(\w+):\s*(.*?)\s*$")

_STEP_KEYS = {
    "seconds": "time_s",
    "TFLOP/s/device": "tflops_per_s_per_device",
    "Tokens/s/device": "tokens_per_s_per_device",
    "loss": "loss",
}














def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _config_value(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _parse_step(match: re.Match[str], line_no: int) -> dict[str, Any] | None:
    """The fields of one ``completed step:`` line, or None without a readable time."""
    fields: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    for piece in match.group(2).split(","):
        key, sep, value = piece.partition(":")
        key = key.strip()
        num = _number(value.strip()) if sep else None
        if not key or num is None:
            continue
        if key in _STEP_KEYS:
            fields.setdefault(_STEP_KEYS[key], num)
        else:
            metrics.setdefault(key, num)
    if "time_s" not in fields:
        return None
    return dict(step=int(match.group(1)), metrics=metrics, line=line_no, **fields)


PROGRESS_EVERY_LINES = 20000
"""Lines read between two progress updates: often enough for a smooth bar, rare enough to
cost nothing next to parsing them."""


@dataclasses.dataclass
class _Parsed:
    steps: StepTable[LogStep] = dataclasses.field(
        default_factory=lambda: StepTable.from_rows(LogStep, ()))
    events: list[LogEvent] = dataclasses.field(default_factory=list)
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    params: float | None = None
    total_tflops_per_step: float | None = None
    memory: dict[str, float] = dataclasses.field(default_factory=dict)
    duplicates: int = 0
    unreadable_steps: int = 0


def _physical_lines(lines: Iterable[str]) -> Iterator[str]:
    """Split what a file iterator yields the way ``str.splitlines`` splits the whole text,
    so line numbers do not depend on whether the log was streamed or read at once."""
    for chunk in lines:
        yield from (chunk.splitlines() or [""])


def parse_lines(lines: Iterable[str], progress: Callable[[int], None] | None = None) -> _Parsed:
    """Read the lines that matter; ignore the rest.

    One pass, one line in memory at a time: steps go straight into columns (a
    ``StepTableBuilder``), so a million-step log costs a few arrays, not a million
    objects. ``progress(chars)`` is called every ``PROGRESS_EVERY_LINES`` lines with the
    characters read since the last call."""
    p = _Parsed()
    builder = StepTableBuilder(LogStep)
    seen: set[int] = set()
    last_step: int | None = None
    per_step_pending = False
    chars = 0
    for n, raw in enumerate(_physical_lines(lines), start=1):
        if progress is not None:
            chars += len(raw) + 1
            if n % PROGRESS_EVERY_LINES == 0:
                progress(chars)
                chars = 0
        line = GLOG_HEADER.sub("", raw.rstrip("\r\n"))
        m = _STEP.search(line)
        if m:
            step = _parse_step(m, n)
            if step is None:
                p.unreadable_steps += 1
            elif step["step"] in seen:
                p.duplicates += 1
            else:
                seen.add(step["step"])
                builder.append(**step)
                last_step = step["step"]
            continue
        if (m := _SAVE.search(line)) or (m := _ASYNC.search(line)):
            kind = "checkpoint_save" if m.re is _SAVE else "checkpoint_async_start"
            s = int(m.group(1))
            p.events.append(LogEvent(kind, n, m.group(0), step=s, anchor_step=s))
        elif m := _WAIT_PREV.search(line):
            p.events.append(LogEvent("checkpoint_wait_previous", n, m.group(0),
                                     seconds=float(m.group(1)), anchor_step=last_step))
        elif m := _WAIT_STEP.search(line):
            s = int(m.group(2))
            p.events.append(LogEvent("checkpoint_wait_step", n, m.group(0), step=s,
                                     seconds=float(m.group(1)), anchor_step=s))
        elif m := _PARAMS.search(line):
            p.params = float(m.group(1)) * 1e9
        elif m := _JAX.search(line):
            p.env["jax"] = m.group(1)
        elif m := _JAXLIB.search(line):
            p.env["jaxlib"] = m.group(1)
        elif m := _BACKEND.search(line):
            p.env["backend"] = m.group(1).strip()
        elif m := _TOTAL_MEM.search(line):
            p.memory["compiled_total_gb"] = float(m.group(1))
            if mo := _OUTPUT_MEM.search(line):
                p.memory["compiled_output_gb"] = float(mo.group(1))
            if mt := _TEMP_MEM.search(line):
                p.memory["compiled_temp_gb"] = float(mt.group(1))
        elif m := _USING.search(line):
            used, limit = float(m.group(1)), float(m.group(2))
            if used >= p.memory.get("device_in_use_gb", -1.0):
                p.memory["device_in_use_gb"] = used
                p.memory["device_limit_gb"] = limit
        elif _PER_STEP.search(line):
            per_step_pending = True
            if mf := _TOTAL_TFLOPS.search(line):
                p.total_tflops_per_step = float(mf.group(1))
                per_step_pending = False
        elif per_step_pending and (m := _TOTAL_TFLOPS.search(line)):
            p.total_tflops_per_step = float(m.group(1))
            per_step_pending = False
        elif m := _CONFIG.search(line):
            p.config[m.group(1)] = _config_value(m.group(2))
    if progress is not None and chars:
        progress(chars)
    steps = builder.build()
    numbers = steps.column("step")
    if numbers.size > 1 and np.any(numbers[1:] < numbers[:-1]):
        steps = steps.take(np.argsort(numbers, kind="stable"))
    p.steps = steps
    return p


def explain_anomalies(
    steps: Sequence[LogStep], events: Sequence[LogEvent]
) -> tuple[list[Anomaly], float]:
    """The steps to keep out of the steady state, each with a likely cause.

    The first step is always one (compilation). Of the others, ``stats.robust_outliers``
    picks those far from the median; a slow one near a checkpoint event is a checkpoint
    stall, a fast one right after a slow one an attribution shift (host-side timing
    charged the queued device work to the slow step), anything else is unexplained.
    Returns the anomalies (by step) and the steady-state median they are measured against.
    """
    if not len(steps):
        return [], math.nan
    rest_times = column_of(steps, "time_s")[1:]
    flagged = stats.robust_outliers(rest_times)
    steady = np.delete(rest_times, flagged)
    med = float(np.median(steady)) if steady.size else math.nan

    def ratio(t: float) -> float:
        return t / med if med > 0 else math.nan

    first = steps[0]
    anomalies = [Anomaly(first.step, first.time_s, ratio(first.time_s), CAUSE_COMPILATION,
                         "first step logged: it includes tracing and compiling the train step")]
    slow_steps = {first.step}
    checkpoint = [e for e in events if e.kind in CHECKPOINT_EVENTS and e.anchor_step is not None]
    for i in flagged:  # in step order; only the flagged rows become objects
        s = steps[i + 1]
        previous = steps[i]
        if s.time_s > med:
            slow_steps.add(s.step)
            near = [e for e in checkpoint
                    if e.anchor_step is not None
                    and e.anchor_step <= s.step <= e.anchor_step + CHECKPOINT_STALL_WINDOW]
            if near:
                near.sort(key=lambda e: (e.seconds is None, -(e.seconds or 0.0), e.line))
                evidence = "; ".join(f"line {e.line}: {e.text}" for e in near[:2])
                anomalies.append(Anomaly(s.step, s.time_s, ratio(s.time_s), CAUSE_CHECKPOINT,
                                         evidence))
            else:
                anomalies.append(Anomaly(
                    s.step, s.time_s, ratio(s.time_s), CAUSE_UNEXPLAINED,
                    "slow, with no compilation or checkpoint event within "
                    f"{CHECKPOINT_STALL_WINDOW} steps"))
        elif previous.step in slow_steps:
            anomalies.append(Anomaly(
                s.step, s.time_s, ratio(s.time_s), CAUSE_ATTRIBUTION,
                f"fast right after slow step {previous.step}: the host ran ahead of the "
                f"device, so step {previous.step} was charged queued device work and this "
                "step only its dispatch; read the two together"))
        else:
            anomalies.append(Anomaly(s.step, s.time_s, ratio(s.time_s), CAUSE_UNEXPLAINED,
                                     "implausibly fast, and the step before it was not slow"))
    return anomalies, med


def import_lines(lines: Iterable[str], source: str,
                 progress: Callable[[int], None] | None = None) -> ImportedRun:
    """Parse a MaxText training log (any iterable of lines, e.g. an open file) into an
    ``ImportedRun``. ``progress`` as in ``parse_lines``."""
    p = parse_lines(lines, progress)
    if not len(p.steps):
        raise LogFormatError(
            f"{source} has no 'completed step: N, seconds: ...' lines; is it a MaxText "
            "training log?"
        )
    anomalies, _ = explain_anomalies(p.steps, p.events)
    numbers = p.steps.column("step")  # sorted and unique
    rows = np.searchsorted(numbers, [a.step for a in anomalies])
    steps = p.steps.with_tags({int(r): (CAUSE_TAGS[a.cause],)
                               for r, a in zip(rows, anomalies, strict=True)})
    times = steps.column("time_s")
    is_steady = np.ones(len(steps), dtype=bool)
    is_steady[rows] = False
    steady = times[is_steady]
    warnings = stats.quality_warnings(steady)
    if p.duplicates:
        warnings.append(f"{p.duplicates} 'completed step' line(s) repeat a step already read "
                        "(several processes in one log, or a restart?); the first was kept")
    if p.unreadable_steps:
        warnings.append(f"{p.unreadable_steps} 'completed step' line(s) had no readable "
                        "'seconds:' value and were skipped")
    unexplained = [a.step for a in anomalies if a.cause == CAUSE_UNEXPLAINED]
    if unexplained:
        warnings.append(f"{len(unexplained)} step(s) far from the steady state without a "
                        f"known cause: {', '.join(map(str, unexplained[:10]))}")
    return ImportedRun(
        source=source,
        env=p.env,
        config=p.config,
        steps=steps,
        step_time=Distribution.of(steady),
        mean_all_s=float(np.mean(times)),
        anomalies=tuple(anomalies),
        events=tuple(p.events),
        params=p.params,
        total_tflops_per_step=p.total_tflops_per_step,
        memory=LogMemory(**p.memory),
        warnings=tuple(warnings),
    )


BINARY_PROBE_BYTES = 4096
"""A NUL byte among a file's first bytes marks it as binary, not a log or a JSON result."""


@contextlib.contextmanager
def open_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A log or result file opened for streaming text, or a one-line LogFormatError
    (missing, unreadable, binary). Undecodable bytes become U+FFFD."""
    p = pathlib.Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below, after the binary check
    except FileNotFoundError:
        raise LogFormatError(f"{p} does not exist") from None
    except OSError as e:
        raise LogFormatError(f"cannot read {p}: {e.strerror or e.__class__.__name__}") from None
    with f:
        if b"\0" in f.peek(BINARY_PROBE_BYTES)[:BINARY_PROBE_BYTES]:
            raise LogFormatError(f"{p} is a binary file, not a training log or pipecheck result")
        with io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline="") as text:
            yield text


def read_text(path: str | os.PathLike[str]) -> str:
    """A file's text, or a one-line LogFormatError."""
    with open_text(path) as f:
        return f.read()


def import_log(path: str | os.PathLike[str], progress: Progress = NO_PROGRESS) -> ImportedRun:
    """Read and parse a MaxText training log file, streaming it line by line."""
    size = _size(path)
    with open_text(path) as f, progress.task(f"reading {os.path.basename(str(path))}",
                                             size, "B") as task:
        return import_lines(f, source=str(path), progress=task.advance)


def _size(path: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
