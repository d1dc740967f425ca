"""The dataloader trace: one track per setting, contiguous batch slices, valid Chrome JSON."""

from pipecheck.report.trace import dataloader_trace, validate_chrome_trace
from tests.unit.measure.test_dataloader import make_result


def test_dataloader_trace_is_valid_and_rebuilds_the_batches():
    trace = dataloader_trace(make_result())
    assert validate_chrome_trace(trace) == []
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in slices] == ["first batch", "batch 1", "batch 2", "batch 3",
                                           "batch 4"]
    assert [e["dur"] for e in slices] == [1.5e6, 1e4, 2e4, 3e4, 4e4]  # microseconds
    for a, b in zip(slices, slices[1:], strict=False):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1e-6  # contiguous, as timed
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
    assert names == ["workers=2 threads=1"]
