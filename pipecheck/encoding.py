"""A record's large arrays compressed on threads: ahead of a write, and in parallel during
it (zlib releases the GIL while it deflates, so other cores do the work).

``ParallelEncoder`` is a ``records.codec.ArrayEncoder``: the record's writer
(``records.base.to_dict``, ``records.store.save``) is given one, and so are the readers
that know a record will be written (``logs.maxtext.import_log``, ``logs.side_by_side``,
``analysis.diff.diff_runs``), which hand it the step columns early (``compress_ahead``).
Its state is its own: one encoder per command, nothing shared between writes. The text
it gives is ``records.codec.encode_array``'s, byte for byte.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Callable, Iterable

import numpy as np

from pipecheck.records.codec import little_endian, zlib_base64

PARALLEL_MIN_BYTES = 1 << 18
"""Arrays from this size on (256 KiB, 32,768 float64 values) are compressed on worker threads
(ahead, or in parallel while a record is written); smaller ones are not worth a hand-off.
From 1 MiB, a 100,000-step ``import --json`` compressed its columns on its own thread after
the analysis: 3.7-3.9x the long-run benchmark's regex pass against 2.8-3.4x from 256 KiB."""

Compress = Callable[[np.ndarray], str]
"""Contiguous little-endian values -> the text of their encoded array."""


class ParallelEncoder:
    """Compresses large arrays on threads for the records written with it.

    ``compress_ahead(arrays)`` starts them, one after the other, on a thread of their own
    while the caller goes on (an array is held here until it is encoded or the encoder is
    dropped, so it is the same array a later ``encode`` is given). ``encode(a)`` takes one
    compressed ahead (waiting for it if it has started; one not yet started is taken back
    and compressed with the rest, so no core waits on that one thread); any other large
    array is left for ``finish``, which compresses them on up to one thread per CPU and
    fills in their dicts. An error while compressing is raised where the text is taken."""

    def __init__(self, cpus: int | None = None, compress: Compress = zlib_base64) -> None:
        self._cpus = cpus
        """Threads ``finish`` may use (default: the CPU count)."""
        self._compress = compress
        self._ahead: dict[int, tuple[np.ndarray, concurrent.futures.Future[str]]] = {}
        """Arrays being compressed ahead, by id (each held, so its id is its own)."""
        self._deferred: list[tuple[dict[str, str], np.ndarray]] = []
        """Dicts ``encode`` returned without their text, and the bytes to fill it from."""

    def compress_ahead(self, arrays: Iterable[np.ndarray]) -> None:
        """Start compressing the large ``arrays`` on a thread of their own."""
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pipecheck-compress")
        for a in arrays:
            if a.nbytes < PARALLEL_MIN_BYTES or id(a) in self._ahead:
                continue
            self._ahead[id(a)] = (a, pool.submit(self._compress, little_endian(a)))
        pool.shutdown(wait=False)

    def is_ahead(self, a: np.ndarray) -> bool:
        """Whether ``a`` was handed to ``compress_ahead`` and not yet taken by ``encode``."""
        entry = self._ahead.get(id(a))
        return entry is not None and entry[0] is a

    def wait_ahead(self) -> None:
        """Wait until every array compressed ahead is done (errors are kept for ``encode``)."""
        concurrent.futures.wait([future for _, future in self._ahead.values()])

    def encode(self, a: np.ndarray) -> dict[str, str]:
        """``encode_array(a)``'s dict; a large array's text is filled in by ``finish``
        unless it was compressed ahead."""
        entry = self._ahead.pop(id(a), None)
        if entry is not None and not entry[1].cancel():  # started (or done): wait for it
            return {"dtype": a.dtype.name, "zlib_base64": entry[1].result()}
        data = little_endian(a)
        out = {"dtype": a.dtype.name, "zlib_base64": ""}
        if data.nbytes < PARALLEL_MIN_BYTES:
            out["zlib_base64"] = self._compress(data)
        else:
            self._deferred.append((out, data))
        return out

    def finish(self) -> None:
        """Compress every array ``encode`` left, on up to one thread per CPU, and fill in
        their dicts: the same bytes as one at a time."""
        deferred, self._deferred = self._deferred, []
        workers = min(len(deferred), self._cpus or os.cpu_count() or 1)
        if workers <= 1:
            texts = [self._compress(data) for _, data in deferred]
        else:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                texts = list(pool.map(self._compress, [data for _, data in deferred]))
        for (out, _), text in zip(deferred, texts, strict=True):
            out["zlib_base64"] = text

    def discard(self) -> None:
        """Drop what ``encode`` left (the record was not written)."""
        self._deferred = []
