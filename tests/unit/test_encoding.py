"""pipecheck.encoding: a record's large arrays compressed on threads (ahead of a write, in
parallel during it) give the bytes ``records.codec.encode_array`` gives one at a time."""

from __future__ import annotations

import collections.abc
import dataclasses
import threading
from typing import Mapping

import numpy as np
import pytest

from pipecheck.encoding import PARALLEL_MIN_BYTES, ParallelEncoder
from pipecheck.records import store
from pipecheck.records.base import to_dict
from pipecheck.records.codec import (
    SERIAL,
    FloatColumn,
    decode_array,
    encode_array,
    float_column,
    zlib_base64,
)


def test_parallel_encoding_gives_the_bytes_of_one_at_a_time():
    rng = np.random.default_rng(0)
    arrays = [np.round(rng.gamma(20, 0.0256, 300_000), 3), np.arange(200_000),
              np.array([1.5, 2.5])]  # the last below PARALLEL_MIN_BYTES: encoded at once
    serial = [encode_array(a) for a in arrays]
    encoder = ParallelEncoder(cpus=4)  # threads even on one CPU
    deferred = [encoder.encode(a) for a in arrays]
    assert [d["zlib_base64"] == "" for d in deferred] == [True, True, False]
    encoder.finish()
    assert deferred == serial
    for a, d in zip(arrays, deferred, strict=True):
        assert np.array_equal(decode_array(d, "x"), a)
    # a write that fails leaves nothing deferred for the next one
    encoder.encode(arrays[0])
    encoder.discard()
    again = encoder.encode(arrays[1])
    encoder.finish()
    assert again == serial[1]


def test_a_record_written_in_parallel_is_the_record_written_one_array_at_a_time(tmp_path):
    """The writer's output with a ParallelEncoder is byte for byte the serial one (a real
    import record of 40,000 steps: columns past PARALLEL_MIN_BYTES)."""
    from pipecheck.logs.maxtext import import_log
    from tests.maxtext_log import write_log

    log = tmp_path / "a.log"
    write_log(log, 40_000)
    run = import_log(log)
    assert any(a.nbytes >= PARALLEL_MIN_BYTES for a in run.steps.per_step_arrays())
    assert store.record_to_json(run, ParallelEncoder(cpus=4)) == store.record_to_json(run,
                                                                                        SERIAL)


class Unreadable(collections.abc.Mapping):
    """A mapping that fails when the writer reads it."""

    def __getitem__(self, key):
        raise RuntimeError("boom")

    def __iter__(self):
        raise RuntimeError("boom")

    def __len__(self):
        return 1


@dataclasses.dataclass(frozen=True)
class Holder:
    samples: FloatColumn
    later: Mapping[str, float]


def test_an_error_in_the_writer_discards_what_was_deferred():
    calls = []
    encoder = ParallelEncoder(cpus=2, compress=lambda data: calls.append(1) or "x")
    big = float_column(np.zeros(PARALLEL_MIN_BYTES // 8 + 1))
    with pytest.raises(RuntimeError, match="boom"):
        to_dict(Holder(big, Unreadable()), encoder)
    encoder.finish()
    assert calls == []  # nothing compressed for a record that was not written
    written = to_dict(Holder(big, {}), encoder)  # the same, written: compressed once
    assert calls == [1] and written["samples"]["zlib_base64"] == "x"


def test_an_array_compressed_ahead_encodes_as_it_would_now():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(300_000)  # 2.4 MB: past PARALLEL_MIN_BYTES
    small = np.arange(10.0)
    expected = encode_array(a)
    encoder = ParallelEncoder()
    encoder.compress_ahead([a, small])
    assert encoder.is_ahead(a) and not encoder.is_ahead(small)
    assert encoder.encode(a) == expected
    assert not encoder.is_ahead(a)  # taken once
    assert encoder.encode(a) == {"dtype": "float64", "zlib_base64": ""}  # now deferred
    encoder.finish()
    # an array is held while ahead: freed by its owner, its id is not another array's
    b = rng.standard_normal(300_000)
    encoder.compress_ahead([b])
    key = id(b)
    del b
    encoder.wait_ahead()
    c = np.ones(300_000)
    assert id(c) != key and not encoder.is_ahead(c)
    out = encoder.encode(c)
    encoder.finish()
    assert out == encode_array(c)


def test_an_error_while_compressing_ahead_is_raised_where_the_result_is_taken():
    def fail(data):
        raise MemoryError("no room")

    encoder = ParallelEncoder(compress=fail)
    a, b = np.zeros(300_000), np.ones(300_000)
    encoder.compress_ahead([a, b])
    encoder.wait_ahead()
    for x in (a, b):  # the error, not a wait that never ends
        with pytest.raises(MemoryError, match="no room"):
            encoder.encode(x)


def test_an_array_not_yet_compressed_ahead_is_compressed_where_it_is_taken():
    """Writing does not wait for the one thread compressing ahead to reach an array it
    has not started: that array is compressed where it is taken, the same bytes."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(300_000), rng.standard_normal(300_000)
    expected = encode_array(b)
    release, started = threading.Event(), threading.Event()
    held, finished = [], []

    def first_held(data):
        if not held:
            held.append(threading.current_thread().name)
            started.set()
            release.wait(120)  # the first array ahead: busy until released
            finished.append(True)
        return zlib_base64(data)

    encoder = ParallelEncoder(cpus=1, compress=first_held)
    encoder.compress_ahead([a, b])
    assert started.wait(120), "the thread compressing ahead never took its first array"
    assert held[0].startswith("pipecheck-compress")
    out_b = encoder.encode(b)  # b not started: taken back, compressed with the rest
    encoder.finish()
    assert out_b == expected
    assert not finished  # ... not after the thread ahead got through a, then b
    release.set()
    assert np.array_equal(decode_array(encoder.encode(a), "a"), a)
    assert not encoder.is_ahead(a) and not encoder.is_ahead(b)
