"""When diff reads B in a second process, and how an error travels back from it
(pipecheck/logs/side_by_side.py). Nothing here forks: the pytest process has JAX imported,
where a fork is refused; tests/integration/test_diff_side_by_side.py forks, in fresh
processes."""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import sys
import threading

import pytest

from pipecheck.errors import LogFormatError, PipecheckError, ResultFormatError
from pipecheck.logs import forked, side_by_side
from pipecheck.logs.forked import portable
from pipecheck.logs.runs import load_run
from pipecheck.logs.side_by_side import (
    SIDE_BY_SIDE_MIN_BYTES,
    load_runs,
    why_one_after_the_other,
)

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
A, B = DATA / "maxtext_a.log", DATA / "maxtext_b.log"


@pytest.fixture
def safe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process where a fork is safe: no JAX imported (for this test), one thread."""
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(forked, "usable_cores", lambda: 2)


def _why(*args: object) -> str:
    return why_one_after_the_other(*args) or ""  # type: ignore[arg-type]


def test_large_logs_go_side_by_side(safe):
    assert why_one_after_the_other(A, B, min_bytes=0) is None


def test_small_logs_a_result_json_or_an_unsafe_process_are_read_one_after_the_other(
        safe, monkeypatch, tmp_path):
    assert "under 4,194,304 bytes" in _why(A, B)
    assert A.stat().st_size < SIDE_BY_SIDE_MIN_BYTES
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"kind": "imported"}))
    assert "pipecheck result" in _why(A, record, 0)
    assert "pipecheck result" in _why(record, B, 0)
    assert "cannot be read" in _why(A, tmp_path / "gone.log", 0)

    with monkeypatch.context() as m:
        m.setitem(sys.modules, "jax", object())
        assert "JAX" in _why(A, B, 0)
    with monkeypatch.context() as m:
        m.setattr(threading, "active_count", lambda: 2)
        assert "thread" in _why(A, B, 0)
    with monkeypatch.context() as m:
        m.setattr(forked, "usable_cores", lambda: 1)
        assert _why(A, B, 0) == "one CPU"
    with monkeypatch.context() as m:
        m.delattr(os, "fork")
        assert "fork" in _why(A, B, 0)


def test_one_after_the_other_is_load_run_twice_without_a_fork(monkeypatch):
    def no_fork(path):
        raise AssertionError("forked")

    monkeypatch.setattr(side_by_side.ChildRead, "start", no_fork)
    monkeypatch.setitem(sys.modules, "jax", object())  # refused whatever the sizes
    got = load_runs(A, B, min_bytes=0)
    assert [r.to_dict() for r in got] == [load_run(A).to_dict(), load_run(B).to_dict()]


def test_an_error_that_pickles_travels_as_itself_with_the_childs_stack():
    try:
        raise LogFormatError("b.log has no 'completed step: N, seconds: ...' lines")
    except LogFormatError as e:
        back = pickle.loads(pickle.dumps(portable(e, "b.log")))
    assert type(back) is LogFormatError and back.exit_code == 2
    assert str(back) == "b.log has no 'completed step: N, seconds: ...' lines"
    assert "in a second process" in back.__notes__[0] and "Traceback" in back.__notes__[0]


class _TwoParts(ResultFormatError):
    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")


class _HoldsALambda(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lambda")
        self.f = lambda: None


def test_an_error_that_cannot_travel_comes_back_as_the_nearest_kind():
    back = pickle.loads(pickle.dumps(portable(_TwoParts("b.log", "bad"), "b.log")))
    assert type(back) is PipecheckError and back.exit_code == 2
    assert str(back) == "b.log: bad"
    back2 = pickle.loads(pickle.dumps(portable(_HoldsALambda(), "b.log")))
    assert type(back2) is RuntimeError and str(back2) == "_HoldsALambda: holds a lambda"


def test_one_child_per_spare_cpu_and_none_from_a_child(monkeypatch):
    """A process forks while fewer of its children work than it has other CPUs; a child
    never forks (diff's B child reads B in one pass; A is not cut while B is read)."""
    monkeypatch.setattr(forked, "usable_cores", lambda: 2)
    monkeypatch.setattr(forked, "_LIVE", {12345})
    assert "already works beside" in (forked.why_not_fork() or "")
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(forked, "usable_cores", lambda: 3)
    assert forked.why_not_fork() is None
    monkeypatch.setattr(forked, "_IN_CHILD", True)
    assert "child itself" in (forked.why_not_fork() or "")


def test_the_pipe_from_a_child_is_widened_where_the_system_allows(monkeypatch):
    """A million-step summary (~50 MB) crosses a 1 MiB pipe in ~50 writes, not ~750 of the
    default 64 KiB; where the system refuses, the pipe stays as it is."""
    fcntl = pytest.importorskip("fcntl")  # POSIX; os.fork, which needs the pipe, is too
    r, w = os.pipe()
    try:
        forked._widen(w)
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) >= forked.PIPE_BYTES
    finally:
        os.close(r)
        os.close(w)
    widened = []
    monkeypatch.setattr(forked, "_widen", widened.append)
    monkeypatch.setattr(forked.os, "fork", lambda: 2 ** 22 + 1)  # the parent's side only
    child = forked.Child.run("x.log", len, "x")
    try:
        assert len(widened) == 1  # the write end, before the fork
    finally:
        child._pipe.close()
        forked._LIVE.discard(child.pid)
    monkeypatch.undo()

    def refuse(fd, cmd, arg):
        raise PermissionError("over /proc/sys/fs/pipe-max-size")

    monkeypatch.setattr(fcntl, "fcntl", refuse)
    r, w = os.pipe()
    try:
        forked._widen(w)  # refused: no error, the pipe as it was
    finally:
        os.close(r)
        os.close(w)


def test_to_save_compresses_a_while_b_is_read(tmp_path):
    """``diff --json``: A's step columns are compressed while B is read (here one after
    the other: this process has JAX imported), and taken when the record is written."""
    from pipecheck.encoding import ParallelEncoder
    from pipecheck.records.codec import encode_array
    from tests.maxtext_log import write_log_pair

    la, lb = write_log_pair(tmp_path, 40_000)  # 320 KB a column: past PARALLEL_MIN_BYTES
    encoder = ParallelEncoder()
    run_a, run_b = load_runs(la, lb, encoder=encoder)
    ahead_a = [encoder.is_ahead(x) for x in run_a.per_step_arrays()]
    ahead_b = [encoder.is_ahead(x) for x in run_b.per_step_arrays()]
    assert all(ahead_a) and len(ahead_a) >= 4 and not any(ahead_b)
    for x in run_a.per_step_arrays():
        assert encoder.encode(x) == encode_array(x.copy())
    plain_a, _ = load_runs(la, lb)  # no encoder given: nothing compressed ahead
    assert not any(encoder.is_ahead(x) for x in plain_a.per_step_arrays())
