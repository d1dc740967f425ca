"""A TensorBoard event file written in batches: TFRecord framing with the CRC-32C of many
records computed at once (numpy), so a thread writing thousands of steps' events holds the
interpreter for little time.

Each record is ``uint64 length, uint32 masked CRC-32C of the length's 8 bytes, data, uint32
masked CRC-32C of the data`` (little-endian), the data one serialized ``Event``; the file
starts with an ``Event`` holding ``file_version = "brain.Event:2"``, and is named
``events.out.tfevents.<seconds>.<host><suffix>``, as TensorBoard finds it. tensorboardX's
own writer computes each CRC in Python, byte by byte (~16 µs for a step's 130-byte event);
here a batch's records of equal length go through numpy together, and the scalar events of a
run of steps are laid out as rows of one array (``scalar_events``: protobuf's wire format,
checked against tensorboardX's ``Event`` by the tests and by the writer at each batch).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import IO, Sequence

import numpy as np

_POLY = 0x82F63B78
"""CRC-32C (Castagnoli), reflected: the CRC TFRecord uses."""


def _table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1)
    return table.astype(np.uint32)


_TABLE = _table()
_MASK_DELTA = 0xA282EAD8


def crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """Pure: the CRC-32C of each row of a (records, length) uint8 array."""
    crc = np.full(len(rows), 0xFFFFFFFF, np.uint32)
    for j in range(rows.shape[1]):
        crc = _TABLE[(crc ^ rows[:, j]) & 0xFF] ^ (crc >> 8)
    return crc ^ np.uint32(0xFFFFFFFF)


def masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC: rotated right by 15 bits, plus a constant (mod 2**32)."""
    c = crc.astype(np.uint64)
    rotated = ((c >> np.uint64(15)) | (c << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def masked_crcs(records: Sequence[bytes]) -> np.ndarray:
    """Pure: the masked CRC-32C of each record (records of one length computed together)."""
    out = np.zeros(len(records), np.uint32)
    by_length: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        by_length.setdefault(len(r), []).append(i)
    for length, at in by_length.items():
        rows = np.frombuffer(b"".join(records[i] for i in at), np.uint8).reshape(len(at), length)
        out[at] = masked(crc32c_rows(rows))
    return out


def frame(records: Sequence[bytes]) -> bytes:
    """Pure: ``records`` as TFRecord bytes."""
    if not records:
        return b""
    headers = [struct.pack("<Q", len(r)) for r in records]
    header_crcs = masked_crcs(headers).tolist()
    data_crcs = masked_crcs(records).tolist()
    parts = []
    for h, hc, r, dc in zip(headers, header_crcs, records, data_crcs, strict=True):
        parts += [h, struct.pack("<I", hc), r, struct.pack("<I", dc)]
    return b"".join(parts)


class EventFile:
    """An event file in ``logdir``: ``write(records)`` appends serialized ``Event``s and
    flushes them to the operating system (a killed process keeps them)."""

    def __init__(self, logdir: str, suffix: str, first_event: bytes) -> None:
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}{suffix}"
        self.path = os.path.join(logdir, name)
        self._file: IO[bytes] | None = open(self.path, "ab")  # noqa: SIM115 - closed by close
        self.write([first_event])

    def write(self, records: Sequence[bytes]) -> None:
        """Append ``records`` (serialized ``Event``s), flushed."""
        self.write_framed(frame(records))

    def write_framed(self, data: bytes) -> None:
        """Append TFRecord bytes (``frame``, ``scalar_events``), flushed."""
        if self._file is None:
            raise ValueError(f"{self.path} is closed")
        self._file.write(data)
        self._file.flush()

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()


def varint(n: int) -> bytes:
    """Protobuf's varint of a non-negative integer."""
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def varint_lengths(n: np.ndarray) -> np.ndarray:
    """Pure: the bytes protobuf's varint takes for each of ``n`` (non-negative), 0 for 0
    (proto3 leaves a zero ``step`` out of its ``Event``)."""
    k = (n > 0).astype(np.int64)
    for bits in range(7, 63, 7):
        k += n >= (1 << bits)
    return k


def _value_template(tag: str) -> tuple[bytes, int]:
    """A ``Summary.Value`` (``tag``, ``simple_value``) as a summary's field 1, its float
    left as zeros, and the float's offset in it."""
    name = tag.encode()
    value = b"\x0a" + varint(len(name)) + name + b"\x15"
    entry_head = b"\x0a" + varint(len(value) + 4)
    return entry_head + value + b"\0\0\0\0", len(entry_head) + len(value)


def _event_rows(walls: np.ndarray, steps: np.ndarray, values: np.ndarray,
                tags: Sequence[str], k: int) -> np.ndarray:
    """The serialized ``Event``s of steps whose step varints are ``k`` bytes long and whose
    ``values`` columns are all present: field 1 ``wall_time`` (double), 2 ``step``
    (varint; none for step 0), 5 ``summary`` (a ``Summary.Value`` per tag)."""
    entries = [_value_template(t) for t in tags]
    summary = b"".join(e for e, _ in entries)
    head = b"\x09" + b"\0" * 8 + (b"\x10" + b"\0" * k if k else b"") + b"\x2a" \
        + varint(len(summary))
    template = np.frombuffer(head + summary, np.uint8)
    rows = np.empty((len(steps), len(template)), np.uint8)
    rows[:] = template
    rows[:, 1:9] = walls.astype("<f8").view(np.uint8).reshape(-1, 8)
    for i in range(k):
        rows[:, 10 + i] = ((steps >> (7 * i)) & 0x7F) | (0x80 if i < k - 1 else 0)
    at = len(head)
    for j, (entry, offset) in enumerate(entries):
        rows[:, at + offset:at + offset + 4] = \
            values[:, j].astype("<f4").view(np.uint8).reshape(-1, 4)
        at += len(entry)
    return rows


def _framed_rows(rows: np.ndarray) -> bytes:
    """Rows of equal-length records as TFRecord bytes."""
    n, length = rows.shape
    header = struct.pack("<Q", length)
    header_crc = masked_crcs([header])[0]
    out = np.empty((n, 16 + length), np.uint8)
    out[:, :8] = np.frombuffer(header, np.uint8)
    out[:, 8:12] = np.frombuffer(struct.pack("<I", header_crc), np.uint8)
    out[:, 12:12 + length] = rows
    out[:, 12 + length:] = masked(crc32c_rows(rows)).astype("<u4").view(np.uint8).reshape(-1, 4)
    return out.tobytes()


def scalar_events(steps: np.ndarray, walls: np.ndarray, tags: Sequence[str],
                  values: np.ndarray) -> bytes:
    """Pure: TFRecord bytes of one ``Event`` per step (in order), its summary holding a
    scalar per tag, ``values[i, j]`` (float32) for step ``i`` and tag ``j``; a NaN is left
    out. Steps of one shape (the same tags present, step varints of one length) are encoded
    together, a run of consecutive steps at a time."""
    steps = np.asarray(steps, np.int64)
    present = ~np.isnan(values)
    pattern = present.astype(np.int64) @ (1 << np.arange(len(tags), dtype=np.int64))
    key = pattern * 16 + varint_lengths(steps)
    cuts = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), len(steps)]
    parts = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        if a == b:
            continue
        cols = np.flatnonzero(present[a])
        rows = _event_rows(walls[a:b], steps[a:b], values[a:b][:, cols],
                           [tags[int(j)] for j in cols], int(varint_lengths(steps[a:a + 1])[0]))
        parts.append(_framed_rows(rows))
    return b"".join(parts)
