"""Text files opened for streaming: plain or gzip-compressed, any line endings.

A log is read as UTF-8 with undecodable bytes replaced (U+FFFD), never rejected: a log
with a stray binary byte is still a log. A file that cannot be opened, is binary, or is a
corrupt gzip file is a one-line ``LogFormatError``.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import pathlib
import zlib
from typing import BinaryIO, Iterator, TextIO

from pipecheck.errors import LogFormatError

BINARY_PROBE_BYTES = 4096
"""A NUL byte among a file's first bytes marks it as binary, not a log or a JSON result."""

GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of every gzip file (RFC 1952)."""


def _open_bytes(p: pathlib.Path) -> BinaryIO:
    try:
        return open(p, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise LogFormatError(f"{p} does not exist") from None
    except OSError as e:
        raise LogFormatError(f"cannot read {p}: {e.strerror or e.__class__.__name__}") from None


def as_text(stream: BinaryIO) -> TextIO:
    """A byte stream read as a log is read: UTF-8, undecodable bytes replaced, line ends
    kept as they are."""
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")


@contextlib.contextmanager
def open_bytes(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A log or result file opened for streaming bytes (a ``.gz`` file is decompressed as
    it is read, whatever its name), or a one-line LogFormatError (missing, unreadable,
    binary, corrupt), also for a corrupt gzip stream met while it is read."""
    p = pathlib.Path(path)
    with _open_bytes(p) as raw:
        assert isinstance(raw, io.BufferedReader)
        stream: BinaryIO = raw
        if raw.peek(2)[:2] == GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        try:
            head = stream.peek(BINARY_PROBE_BYTES)[:BINARY_PROBE_BYTES]  # type: ignore[attr-defined]
        except (OSError, EOFError, zlib.error) as e:
            raise LogFormatError(f"{p} is not a readable gzip file ({e}); "
                                 "decompress it or give the plain log") from None
        if b"\0" in head:
            raise LogFormatError(f"{p} is a binary file, not a training log or pipecheck result")
        try:
            yield stream
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise LogFormatError(f"{p} is a truncated or corrupt gzip file ({e}); "
                                 "decompress what is left or give the plain log") from None


@contextlib.contextmanager
def open_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A log or result file opened for streaming text (``as_text`` of ``open_bytes``), or
    a one-line LogFormatError (missing, unreadable, binary, corrupt)."""
    with open_bytes(path) as stream, as_text(stream) as text:
        yield text


def read_text(path: str | os.PathLike[str]) -> str:
    """A file's text, or a one-line LogFormatError."""
    with open_text(path) as f:
        return f.read()


def file_size(path: str | os.PathLike[str]) -> int:
    """The file's size in bytes (0 when it cannot be read: progress only)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
