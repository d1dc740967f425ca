"""Reading TensorBoard event files back, for the tests of ``Monitor(tensorboard_dir=...)``:
TensorBoard's own ``EventAccumulator`` where TensorBoard is installed, else the TFRecord
framing read here (each record's length and data checked against their masked CRC-32C with
tensorboardX's own ``masked_crc32c``) and each record parsed as an ``Event`` by the protobuf
classes tensorboardX ships. A record cut short at the end of a file (a writer killed in the
middle of it) ends the file, as TensorBoard reads it."""

from __future__ import annotations

import pathlib
import struct

import pytest

Scalars = dict[str, dict[int, float]]
"""tag -> {step: value}."""


def event_files(logdir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(logdir.glob("events.out.tfevents.*"))


def read_records(path: pathlib.Path) -> list[bytes]:
    """The records of a TFRecord file; a bad CRC fails the test."""
    from tensorboardX.record_writer import masked_crc32c

    data = path.read_bytes()
    out, at = [], 0
    while at + 12 <= len(data):
        header = data[at:at + 8]
        (n,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert crc == masked_crc32c(header), f"{path}: bad length CRC at byte {at}"
        if at + 12 + n + 4 > len(data):
            break  # cut short by a kill: the end of the file
        body = data[at + 12:at + 12 + n]
        (crc,) = struct.unpack("<I", data[at + 12 + n:at + 16 + n])
        assert crc == masked_crc32c(body), f"{path}: bad data CRC at byte {at}"
        out.append(body)
        at += 16 + n
    return out


def read_scalars(logdir: pathlib.Path) -> Scalars:
    """Every scalar in ``logdir``'s event files."""
    pytest.importorskip("tensorboardX")
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        EventAccumulator = None
    if EventAccumulator is not None:
        acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
        acc.Reload()
        return {tag: {e.step: e.value for e in acc.Scalars(tag)}
                for tag in acc.Tags()["scalars"]}
    from tensorboardX.proto.event_pb2 import Event

    out: Scalars = {}
    for path in event_files(logdir):
        for record in read_records(path):
            event = Event.FromString(record)
            for v in event.summary.value:
                out.setdefault(v.tag, {})[event.step] = v.simple_value
    return out
