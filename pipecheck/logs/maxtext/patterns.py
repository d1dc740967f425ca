"""The grammar shared by a MaxText log's readers: the absl header, a log viewer's
timestamp line, the step line's mark and the keys of its fields."""

from __future__ import annotations

import re

# --- line patterns ---------------------------------------------------------------------
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
GLOG_HEADER = re.compile(
    r"[IWEF](?P<month>\d{2})(?P<day>\d{2}) (?P<clock>(?P<h>\d{2}):(?P<m>\d{2}):"
    r"(?P<s>\d{2}(?:\.\d+)?))\s+(?P<thread>\d+)\s+[^\s:\]]+:\d+\]\s?")
STAMP = re.compile(
    r"[^\w\n]*\d{4}-(?P<month>\d{2})-(?P<day>\d{2})[ T](?P<clock>(?P<h>\d{2}):(?P<m>\d{2}):"
    r"(?P<s>\d{2}(?:\.\d+)?))(?:\s*(?:Z|[A-Z]{2,5}|[+-]\d{2}:?\d{2}))?\s*")
"""A line of a date and time alone (``2023-10-03 11:48:40.025 PDT``, after a prefix such as
``# ``; ISO ``2023-10-03T18:48:40.025Z`` too): the timestamp a log viewer such as Cloud
Logging writes on a line of its own above each entry. It times the line below it as an
absl header would (matched whole, with ``fullmatch``; the year is not used, as an absl
header has none)."""
STEP_MARK = "completed step:"
PROFILER_STEP_MARK = "completed profiler activation/deactivation step:"


STEP_KEYS = {
    "seconds": "time_s",
    "TFLOP/s/device": "tflops_per_s_per_device",
    "TFLOP/s": "tflops_per_s_per_device",
    "Tokens/s/device": "tokens_per_s_per_device",
    "loss": "loss",
}
"""The step line's keys read into ``LogStep`` fields (any other key is a metric). MaxText
before 2024 printed the same per-device value as ``TFLOP/s`` (its ``write_metrics``:
``TFLOP/s: {metrics['scalar']['perf/per_device_tflops_per_sec']}``), later as
``TFLOP/s/device``."""


SKELETON_DELETE = b"0123456789"
"""What a step line's shape is left with when these are deleted: its keys, separators,
dots, signs and header letters. Lines of one shape are read together."""


HAS_DIGIT = re.compile(r"\d")
