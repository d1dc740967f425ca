"""analysis.profile on hand-built timelines: exact busy/idle sums, idle charged to the
thread's activity, and the verdict on hand-built estimates."""

import numpy as np
import pytest

from pipecheck.analysis import profile as ap
from pipecheck.analysis import unmarked
from pipecheck.errors import CaptureError
from pipecheck.records.common import Estimate


def timeline(busy, events, markers=(), runs=None):
    """events: (start, end, name) on the training thread; markers: (step, start, end)."""
    table = {}
    codes = [table.setdefault(n, len(table)) for _, _, n in events]
    mk = np.asarray(markers, dtype=float).reshape(-1, 3)
    return ap.CaptureTimeline(
        host="h", device="cpu", busy=np.asarray(busy, dtype=float).reshape(-1, 2),
        starts=np.asarray([e[0] for e in events], dtype=float),
        ends=np.asarray([e[1] for e in events], dtype=float),
        names=np.asarray(codes, dtype=int), name_table=tuple(table),
        marker_steps=mk[:, 0].astype(int), marker_starts=mk[:, 1], marker_ends=mk[:, 2],
        module_runs=runs or {})


def test_classify_names():
    assert ap.classify("$builtins next") == ap.INPUT
    assert ap.classify("$data_loader.py:547 __next__") == ap.INPUT
    assert ap.classify("BlockHostUntilReady") == ap.SYNC
    assert ap.classify("$array.py:298 __float__") == ap.HOST  # a read by what it does: below
    assert ap.classify("backend_compile_and_load") == ap.COMPILE
    assert ap.classify("$checkpoint_manager.py:90 save") == ap.CHECKPOINT
    assert ap.classify("PjitFunction(train_step)") == ap.DISPATCH
    assert ap.classify("$train.py:12 loss_fn") == ap.HOST


def test_merge_and_covered():
    s, e = ap.merge(np.array([[5.0, 6.0], [0.0, 2.0], [1.0, 3.0], [3.0, 4.0]]))
    assert s.tolist() == [0.0, 5.0] and e.tolist() == [4.0, 6.0]
    assert ap.covered(s, e, np.array([0.0, 1.0, 4.5, 5.5, 10.0])).tolist() == [
        0.0, 1.0, 4.0, 4.5, 5.0]


def test_idle_charged_to_what_the_thread_did():
    # two steps of 10 s; in each the thread loads 0-6 (device idle), dispatches 6-6.5,
    # the device runs 6.5-9.5, the thread syncs 6.5-9.5 (device busy) and idles 9.5-10
    events, busy, markers = [], [], []
    for k in range(2):
        o = 10.0 * k
        markers.append((k, o, o + 10))
        events += [(o, o + 6, "$builtins next"), (o + 0.5, o + 5.5, "$time sleep"),
                   (o + 6, o + 6.5, "PjitFunction(train_step)"),
                   (o + 6.5, o + 9.5, "$array.py:298 __float__")]
        busy += [(o + 6.5, o + 8.0), (o + 7.5, o + 9.5)]
    t = timeline(busy, events, markers)
    steps = ap.find_steps(t)
    bd = ap.split_steps(t, steps)
    assert bd.times.tolist() == [10.0, 10.0]
    assert bd.busy.tolist() == [3.0, 3.0]
    assert bd.idle_by[ap.INPUT].tolist() == [6.0, 6.0]
    assert bd.idle_by[ap.DISPATCH].tolist() == [0.5, 0.5]
    assert bd.idle_by[ap.SYNC].tolist() == [0.0, 0.0]
    assert bd.idle_by[ap.HOST].tolist() == [0.5, 0.5]
    assert bd.thread_by[ap.SYNC].tolist() == [3.0, 3.0]
    assert bd.thread_by[ap.INPUT].tolist() == [6.0, 6.0]
    assert bd.calls.tolist() == [1, 1]


def test_no_markers_needs_step_fn():
    t = timeline([(0, 1)], [(0, 0.1, "PjitFunction(step)"), (1, 1.1, "PjitFunction(step)")])
    with pytest.raises(CaptureError, match="no step markers.*--step-fn.*step x2"):
        ap.find_steps(t)
    steps = ap.find_steps(t, "step")
    assert steps.starts.tolist() == [0.0] and steps.ends.tolist() == [1.0]
    with pytest.raises(CaptureError, match="--step-fn other: the capture holds 0 call"):
        ap.find_steps(t, "other")


def test_step_fn_prefers_device_executions():
    runs = {"jit_step": np.array([[0.5, 0.9], [1.5, 1.9], [2.5, 2.9]])}
    t = timeline([(0.5, 0.9)], [(0, 0.1, "PjitFunction(step)"), (0.1, 0.2, "PjitFunction(step)"),
                                (0.2, 0.3, "PjitFunction(step)")], runs=runs)
    steps = ap.find_steps(t, "step")
    assert steps.starts.tolist() == [0.5, 1.5] and steps.source == "jit_step on the device"


def estimates(compute, loader, step, sync=0.0, idle=0.5, dispatch=0.0, calls=1.0,
              background=False):
    def est(v):
        return Estimate(v, v * 0.98, v * 1.02, 20)
    return ap.ProfileEstimates(est(compute), est(loader), est(step), sync, background, idle,
                               dispatch, calls)


@pytest.mark.parametrize("args, kwargs, verdict", [
    ((0.010, 0.030, 0.031), {"idle": 0.67}, "input-bound"),
    ((0.045, 0.015, 0.060), {"sync": 0.75, "idle": 0.25}, "forced-sync"),
    ((0.045, 0.015, 0.060), {"sync": 0.0, "idle": 0.25}, "inconclusive"),
    ((0.045, 0.003, 0.047), {"sync": 0.9, "idle": 0.04}, "compute-bound"),
])
def test_verdict_is_compares(args, kwargs, verdict):
    assert ap.profile_verdict(estimates(*args, **kwargs)).verdict == verdict


def test_host_bound_needs_many_calls_and_dispatch_idle():
    many = estimates(0.001, 0.0001, 0.010, idle=0.9, dispatch=0.8, calls=50)
    v = ap.profile_verdict(many)
    assert v.verdict == ap.HOST_BOUND == "host-bound" and "host-bound (dispatch)" in v.reason
    assert v.excess_over_bound == pytest.approx(0.010 / 0.001 - 1.0)
    few = estimates(0.001, 0.0001, 0.010, idle=0.9, dispatch=0.8, calls=1)
    assert ap.profile_verdict(few).verdict != "host-bound"
    waiting_input = estimates(0.001, 0.008, 0.010, idle=0.9, dispatch=0.1, calls=50)
    assert ap.profile_verdict(waiting_input).verdict != "host-bound"


def test_background_loader_time_is_the_step_where_the_thread_waited():
    # a thread that waits 20 of 30 ms for a worker (blocked in a queue), with a 10 ms sync:
    # the loader took the whole step; as compare would say, input-bound, not forced-sync
    events, busy, markers = [], [], []
    for k in range(8):
        o = 0.030 * k
        markers.append((k, o, o + 0.030))
        events += [(o, o + 0.020, "$builtins next"), (o + 0.001, o + 0.019, "$queue.py:154 get"),
                   (o + 0.020, o + 0.030, "$array.py:298 __float__")]
        busy.append((o + 0.020, o + 0.030))
    t = timeline(busy, events, markers)
    bd = ap.split_steps(t, ap.find_steps(t))
    steady = np.arange(8) > 0
    e = ap.estimates(bd, steady)
    assert e.background_loader
    assert e.loader.value == pytest.approx(0.030)
    assert ap.profile_verdict(e).verdict == "input-bound"


def test_sync_charged_to_the_users_function():
    # "log" is an annotation opened inside a span's __enter__ frame and outliving it
    events = [(0, 10, "train"), (1, 5, "$train.py:40 log_metrics"),
              (1.1, 1.3, "$spans.py:235 __enter__"), (1.2, 4.8, "log"),
              (1.5, 4.5, "$array.py:298 __float__"), (1.6, 4.4, "np.asarray(jax.Array)"),
              (6, 7, "$array.py:298 __float__"), (6.5, 6.6, "CommonPjRtBuffer::Await")]
    t = timeline([(0, 1)], events, [(0, 0, 10)])
    steps = ap.find_steps(t)
    calls = ap.sync_calls(t, steps, np.array([True]))
    assert [(c.file, c.def_line, c.function, c.sync, c.seconds) for c in calls] == [
        ("train.py", 40, "log_metrics", "__float__", 3.0), ("", 0, "<loop>", "__float__", 1.0)]


def names_of(t, mask):
    return [t.name_table[t.names[i]] for i in np.flatnonzero(mask)]


def test_a_host_read_is_the_library_frame_around_a_wait_for_a_device_buffer():
    # JAX 0.10's .item(): _item -> concrete_or_error -> numpy asarray -> the buffer's Await;
    # the same Await inside a dispatch is the runtime's, not a read
    events = [(0, 10, "$train.py:40 log_metrics"), (1, 9, "$array_methods.py:273 _item"),
              (1.1, 8.9, "$core.py:1970 concrete_or_error"), (1.2, 8.8, "$numpy asarray"),
              (1.3, 1.4, "CommonPjRtBuffer::Await"), (11, 12, "PjitFunction(step)"),
              (11.5, 11.6, "CommonPjRtBuffer::Await")]
    t = timeline([(0, 0.5), (10.5, 11)], events, [(0, 0, 13)])
    assert names_of(t, ap.host_reads(t)) == ["$array_methods.py:273 _item"]
    (call,) = ap.sync_calls(t, ap.find_steps(t), np.array([True]))
    assert (call.file, call.def_line, call.function, call.sync, call.seconds) == (
        "train.py", 40, "log_metrics", "_item", 8.0)


def test_a_library_frame_returning_as_the_device_finishes_is_a_read():
    # np.asarray waits without an annotated Await: it returns 50 us after the device is done;
    # a numpy call the device's end merely falls inside (returning 1 ms later) is host work
    events = [(0, 2, "$train.py:40 step"), (0.1, 1.00005, "$numpy asarray"),
              (1.5, 3.001, "$numpy array")]
    t = timeline([(0.0, 1.0), (2.0, 3.0)], events, [(0, 0, 4)])
    assert names_of(t, ap.host_reads(t)) == ["$numpy asarray"]


def test_host_ahead_of_the_device_uses_the_devices_executions():
    # markers of 0.1 s while the device runs each step for 1 s afterwards
    markers = [(k, 0.1 * k, 0.1 * k + 0.1) for k in range(4)]
    runs = {"jit_step": np.array([[1.0 + k, 1.9 + k] for k in range(4)])}
    t = timeline(runs["jit_step"], [(0, 0.05, "PjitFunction(step)")], markers, runs)
    steps = ap.find_steps(t)
    assert steps.starts.tolist() == [1.0, 2.0, 3.0]
    assert steps.source == "jit_step on the device (the host ran ahead of it)"


# --- captures without step markers, read without --step-fn (analysis.unmarked) -------------

def calls(name, starts, length=0.001):
    """A jitted call per start, each with the nested twin the tracer records."""
    return [e for s in starts for e in ((s, s + length, f"PjitFunction({name})"),
                                         (s, s + length, f"PjitFunction({name})"))]


def test_the_repeating_function_holding_the_device_is_the_step():
    runs = {"jit_train_step": np.array([[0.1 * k + 0.01, 0.1 * k + 0.08] for k in range(6)]),
            "jit_log": np.array([[0.1 * k + 0.085, 0.1 * k + 0.09] for k in range(6)])}
    events = calls("train_step", [0.1 * k for k in range(6)]) + calls(
        "log", [0.1 * k + 0.084 for k in range(6)])
    t = timeline(np.concatenate(list(runs.values())), events, runs=runs)
    picked = unmarked.pick_step(t)
    assert picked is not None and (picked.function, picked.executions) == ("train_step", 6)
    assert picked.device_share == pytest.approx(0.42 / 0.45)


def test_no_function_is_the_step_below_the_thresholds():
    # three functions of the same cost: none holds more than half the device time
    runs = {f"jit_f{i}": np.array([[0.01 * k + 0.003 * i, 0.01 * k + 0.003 * i + 0.002]
                                   for k in range(20)]) for i in range(3)}
    events = [e for i in range(3) for e in calls(f"f{i}", [0.01 * k + 0.003 * i - 0.0005
                                                           for k in range(20)], 0.0004)]
    t = timeline(np.concatenate(list(runs.values())), events, runs=runs)
    assert [c.device_share for c in unmarked.candidates(t)] == pytest.approx([1 / 3] * 3)
    assert unmarked.pick_step(t) is None
    # one function holding all the device time, run 4 times: too few steps
    four = {"jit_step": np.array([[k + 0.1, k + 0.9] for k in range(4)])}
    t4 = timeline(four["jit_step"], calls("step", [float(k) for k in range(4)]), runs=four)
    assert unmarked.AUTO_MIN_EXECUTIONS == 5 and unmarked.pick_step(t4) is None


def test_without_per_module_device_time_the_share_is_of_the_calls():
    # a GPU capture without an XLA Modules line: a call traced inside another is not counted
    events = calls("step", [float(k) for k in range(5)], 0.5) + [
        (0.1, 0.2, "PjitFunction(inner)"), (3.6, 3.7, "PjitFunction(metric)")]
    t = timeline([(0.0, 5.0)], events)
    assert unmarked.jitted_calls(t) == {"step": 5, "metric": 1}
    picked = unmarked.pick_step(t)
    assert picked is not None and picked.function == "step"
    assert picked.device_share == pytest.approx(5 / 6)


def test_whole_capture_window_sets_compile_idle_apart():
    # 0-1 s compiling (device idle), then 1-3 s: the thread loads 1-2 (device idle), the
    # device runs 2-3 while the thread sits in a sync
    events = [(0.0, 1.0, "backend_compile_and_load"), (1.0, 2.0, "$builtins next"),
              (2.0, 2.01, "PjitFunction(step)"), (2.01, 3.0, "$array.py:298 __float__")]
    t = timeline([(2.0, 3.0)], events)
    w = unmarked.window(t)
    assert (w.starts.tolist(), w.ends.tolist(), w.source) == ([0.0], [3.0], "the whole capture")
    r = unmarked.reading(ap.split_steps(t, w))
    assert (r.wall, r.busy, r.input_s, r.compile_idle) == pytest.approx((2.0, 1.0, 1.0, 1.0))
    assert r.idle == pytest.approx(1.0) and r.sync_s == pytest.approx(0.99) and r.calls == 1
    e = unmarked.estimates(r)
    assert e.step.n == 1 and e.idle_share == pytest.approx(0.5)


def reading(wall=1.0, busy=0.2, loader=0.1, sync=0.0, dispatch_idle=0.0, launching=0.0,
            calls=1):
    return unmarked.Reading(wall, busy, loader, loader, sync, wall - busy, dispatch_idle,
                            launching, calls, False, 0.0)


@pytest.mark.parametrize("kwargs, verdict", [
    # many small calls, the device idle 90% while the thread launches them
    ({"busy": 0.1, "dispatch_idle": 0.8, "launching": 0.3, "calls": 400}, "host-bound"),
    # the same idle in Python around one call: not the launches (LAUNCH_SHARE)
    ({"busy": 0.1, "dispatch_idle": 0.8, "launching": 0.01, "calls": 400}, "inconclusive"),
    # loading 0.45 then computing 0.45, the thread in a sync meanwhile: serialized
    ({"busy": 0.45, "loader": 0.45, "sync": 0.45}, "forced-sync"),
    # the same without a sync: something else stretches the capture
    ({"busy": 0.45, "loader": 0.45}, "inconclusive"),
    ({"busy": 0.1, "loader": 0.9}, "input-bound"),
    ({"busy": 0.9, "loader": 0.05, "sync": 0.5}, "compute-bound"),
])
def test_whole_capture_verdict(kwargs, verdict):
    v = unmarked.verdict(reading(**kwargs))
    assert v.verdict == verdict
    assert "over the whole capture" in v.reason
    assert ("host-bound (dispatch)" in v.reason) == (verdict == "host-bound")
