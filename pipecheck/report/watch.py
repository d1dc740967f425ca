"""``pipecheck watch``'s text: a running Monitor's status (one frame), and the summary it
ends with. Pure: both return text."""

from __future__ import annotations

from pipecheck.analysis.live import LiveStatus
from pipecheck.units import ms


def _rate(status: LiveStatus) -> str:
    whole = f"{status.steps_per_s:.2f} over the run ({ms(status.wall_s)})"
    if status.recent_steps_per_s is None:
        return whole
    return f"{status.recent_steps_per_s:.2f} since the last write, {whole}"


def _stalls(status: LiveStatus) -> str:
    if not status.stalls:
        return "none"
    causes = ", ".join(f"{cause} {n}" for cause, n in status.stall_causes)
    return f"{status.stalls} ({causes})"


def _lines(status: LiveStatus) -> list[str]:
    rows = [("steps", f"{status.steps:,}"),
            ("steps/s", _rate(status)),
            ("input wait", f"{100 * status.input_share:.1f}% of the wall time"),
            ("stalls so far", _stalls(status)),
            ("verdict so far", f"{status.verdict} ({status.reason})")]
    return [f"{label:15s} {value}" for label, value in rows]


def format_watch(path: str, status: LiveStatus, age_s: float) -> str:
    """One frame: the file, how the run stands, and its numbers so far."""
    state = status.state if status.state != "ended early" else \
        f"ended early {status.end_message}"
    head = f"pipecheck watch: {path} ({state}; written {age_s:.0f} s ago)"
    return "\n".join([head, *_lines(status)])


def format_watch_end(path: str, status: LiveStatus, interrupted: bool) -> str:
    """The summary ``watch`` ends with: why it ended, the numbers, and what to run next."""
    if status.state == "finished":
        why = "the run finished"
    elif status.state == "ended early":
        why = f"the run ended early {status.end_message}"
    else:
        why = "stopped watching (Ctrl-C); the run may go on"
    lines = [f"pipecheck watch: {path}: {why}", *_lines(status)]
    if not interrupted or status.state != "running":
        lines.append(f"next: pipecheck report {path} -o run.html (the verdict, what each "
                     "change buys, the timeline)")
    return "\n".join(lines)
