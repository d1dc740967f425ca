"""The event file's TFRecord framing: the CRCs computed a batch at a time equal
tensorboardX's own, byte-by-byte ``masked_crc32c``, on records of many lengths."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from pipecheck.monitor.event_file import crc32c_rows, frame, masked_crcs


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
