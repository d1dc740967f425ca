"""XProf's own reading of a capture (``pipecheck profile --xprof``), for side-by-side display.

The optional ``xprof`` package (``pip install 'pipecheck[xprof]'``) runs its
input-pipeline analyzer offline, without TensorFlow:
``xprof.convert.raw_to_tool_data.xspace_to_tool_data([pb], "input_pipeline_analyzer", {})``
returns JSON tables; the second holds the conclusion (``input_conclusion``) and the average
step-time breakdown (``*_time_ms_avg``). XProf caches its intermediate results in a file
beside the capture it reads (``ALL_HOSTS.op_stats_v2.pb``) and reuses that file for any
capture in the same folder: the capture is read from a copy in a temporary folder, so the
user's folder is never written and one capture's cache never answers for another.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pathlib
import shutil
import tempfile
from typing import Iterator, Sequence

from pipecheck.errors import CaptureError
from pipecheck.records.profile import XprofSummary

BREAKDOWN = {
    "device_compute": "device compute", "device_to_device": "device to device",
    "device_collectives": "device collectives", "host_compute": "host compute",
    "kernel_launch": "kernel launch", "infeed": "input", "outfeed": "output",
    "compile": "compilation", "other": "all others",
}
"""XProf's step-time categories (``<key>_time_ms_avg``) and the labels it shows them under."""


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """XProf's C++ logs every stage to file descriptor 2: silence it for the call."""
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


MISSING = "--xprof needs XProf's analyzers: pip install 'pipecheck[xprof]'"


def check_available() -> None:
    """Refuse ``--xprof`` before any reading when the ``xprof`` package is missing."""
    if importlib.util.find_spec("xprof") is None:
        raise CaptureError(MISSING)


def xprof_input_pipeline(files: Sequence[pathlib.Path]) -> XprofSummary:
    """XProf's input-pipeline conclusion and step-time breakdown for the capture files."""
    try:
        # lazy: an optional extra, only for --xprof
        from xprof.convert import raw_to_tool_data
    except ImportError:
        raise CaptureError(MISSING) from None
    with tempfile.TemporaryDirectory(prefix="pipecheck-xprof-") as tmp:
        copies = []
        for f in files:
            copies.append(pathlib.Path(tmp) / f.name)
            shutil.copyfile(f, copies[-1])
        with _quiet_stderr():
            data = raw_to_tool_data.xspace_to_tool_data(
                [str(c) for c in copies], "input_pipeline_analyzer", {})
    raw = data[0] if isinstance(data, tuple) else data
    try:
        props = json.loads(raw)[1]["p"]
    except (ValueError, LookupError, TypeError):
        raise CaptureError("XProf's input-pipeline analyzer returned no step-time table for "
                           "this capture") from None
    breakdown = {label: float(props.get(f"{key}_time_ms_avg", 0.0)) / 1e3
                 for key, label in BREAKDOWN.items()}
    return XprofSummary(
        conclusion=str(props.get("input_conclusion", "")),
        step_s=float(props.get("steptime_ms_average", "nan")) / 1e3,
        breakdown_s={k: v for k, v in breakdown.items() if v > 0})
