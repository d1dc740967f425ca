"""The event file's TFRecord framing: the CRCs computed a batch at a time equal
tensorboardX's own, byte-by-byte ``masked_crc32c``, on records of many lengths."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from pipecheck.monitor.event_file import crc32c_rows, frame, masked_crcs, scalar_events


def test_batched_crcs_equal_tensorboardxs_own() -> None:
    record_writer = pytest.importorskip("tensorboardX.record_writer")
    rng = random.Random(7)
    records = [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 8, 8, 130, 131])))
               for _ in range(60)]
    assert masked_crcs(records).tolist() == [record_writer.masked_crc32c(r) for r in records]
    # the CRC-32C check value of the standard: "123456789" -> 0xE3069283
    assert crc32c_rows(np.frombuffer(b"123456789", np.uint8).reshape(1, 9)).tolist() == \
        [0xE3069283]


def test_frame_lays_out_each_record_as_tfrecord() -> None:
    record_writer = pytest.importorskip("tensorboardX.record_writer")
    out = frame([b"abc", b""])
    mc = record_writer.masked_crc32c
    expected = b"".join(
        struct.pack("<Q", len(r)) + struct.pack("<I", mc(struct.pack("<Q", len(r))))
        + r + struct.pack("<I", mc(r)) for r in (b"abc", b""))
    assert out == expected


def test_scalar_events_are_the_bytes_tensorboardxs_protobuf_classes_write() -> None:
    """Steps whose varints take 0 (step 0: proto3 leaves it out) to 6 bytes, values missing
    in some steps, none in one, a zero value, consecutive runs of each shape."""
    pytest.importorskip("tensorboardX")
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary

    tags = ("pipecheck/step_time_s", "pipecheck/data_wait_s", "a/b")
    rng = np.random.default_rng(3)
    steps = np.array([0, 1, 2, 3, 127, 128, 129, 16383, 16384, 2**21 + 5, 2**40])
    walls = 1.79e9 + rng.random(len(steps))
    values = rng.random((len(steps), 3))
    values[3, 1] = values[0, 2] = np.nan
    values[5, :] = np.nan
    values[6, 0] = 0.0
    expected = frame([Event(wall_time=float(walls[i]), step=int(s), summary=Summary(value=[
        Summary.Value(tag=t, simple_value=float(values[i, j]))
        for j, t in enumerate(tags) if not np.isnan(values[i, j])])).SerializeToString()
        for i, s in enumerate(steps)])
    assert scalar_events(steps, walls, tags, values) == expected
