"""Result files: load a record by its ``kind`` and ``format_version``, save one atomically.

A file carries ``format_version`` and ``kind``; an unknown version or kind is a clear
error. Writes are atomic (temporary file in the same directory, then rename) and
refuse to overwrite an existing file unless ``force`` is set.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Mapping, overload

from pipecheck.errors import (
    OutputExistsError,
    OutputPathError,
    PipecheckError,
    ResultFormatError,
)

# Every record module registers its kind on import; none of them imports JAX.
from pipecheck.records import (  # noqa: F401
    compare,
    dataloader,
    diff,
    imported,
    monitor,
    profile,
    synthetic,
    whatif,
)
from pipecheck.records.base import _KINDS, Record, T, from_dict, to_dict
from pipecheck.records.codec import SERIAL, ArrayEncoder, Base64Text
from pipecheck.records.versions import (
    FORMAT_VERSION,  # noqa: F401 - read as store.FORMAT_VERSION
    upgrade,
)

_ONE_LINE = json.JSONEncoder(allow_nan=False, separators=(", ", ": ")).encode
"""A value as JSON on one line, by json's C encoder (NaN refused: ``to_dict`` made it null)."""


def dumps(data: object) -> str:
    """JSON text of a record's dict, laid out for reading: an object's keys one per line,
    indented two spaces a level; a list of objects or lists one item per line, any other
    list on one line; each item, and everything below it, on one line. The layout costs a
    Python call per key and per list item; the values are written by json's C encoder
    (``indent`` would write each number in Python, several times slower)."""
    out: list[str] = []
    _lay_out(data, 0, out)
    out.append("\n")
    return "".join(out)


def _lay_out(value: object, level: int, out: list[str]) -> None:
    if isinstance(value, dict) and value:
        pad = "  " * (level + 1)
        out.append("{\n")
        for k, (key, v) in enumerate(value.items()):
            out.append(f",\n{pad}" if k else pad)
            out.append(_ONE_LINE(str(key)) + ": ")
            _lay_out(v, level + 1, out)
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        pad = "  " * (level + 1)
        out.append("[\n" + pad + f",\n{pad}".join(map(_ONE_LINE, value))
                   + "\n" + "  " * level + "]")
    elif type(value) is Base64Text:  # nothing to escape
        out.append(f'"{value}"')
    else:
        out.append(_ONE_LINE(value))


def record_to_json(record: Record, encoder: ArrayEncoder = SERIAL) -> str:
    """A record's JSON text, its arrays encoded by ``encoder``."""
    return dumps(to_dict(record, encoder))


def load_dict(data: Mapping[str, object], origin: str = "input") -> Record:
    """Turn a loaded JSON object into its record class, checking version and kind (an
    older version read is converted: ``versions.upgrade``)."""
    if not isinstance(data, Mapping) or "kind" not in data or "format_version" not in data:
        raise ResultFormatError(f"{origin} is not a pipecheck result (no kind/format_version)")
    data = upgrade(data, origin)
    kind = data["kind"]
    if not isinstance(kind, str):
        raise ResultFormatError(f"{origin} is not a pipecheck result (kind is not a string)")
    cls = _KINDS.get(kind)
    if cls is None:
        raise ResultFormatError(
            f"{origin} has unknown kind {kind!r}; known: {', '.join(sorted(_KINDS))}"
        )
    try:
        return from_dict(cls, data)
    except ResultFormatError as e:
        raise ResultFormatError(f"{origin}: {e}") from None


@overload
def load(path: str | os.PathLike[str]) -> Record: ...


@overload
def load(path: str | os.PathLike[str], expect: type[T]) -> T: ...


def load(path: str | os.PathLike[str], expect: type[T] | None = None) -> T | Record:
    """Read a result file; with ``expect``, insist on that record type."""
    p = pathlib.Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ResultFormatError(f"result file {p} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultFormatError(
            f"{p} is not a readable JSON result file ({e.__class__.__name__})"
        ) from None
    record = load_dict(data, origin=str(p))
    if expect is not None and not isinstance(record, expect):
        raise ResultFormatError(
            f"{p} holds a {record.kind!r} result; expected {expect.KIND!r}"  # type: ignore[attr-defined]
        )
    return record


def check_writable(path: str | os.PathLike[str] | None, force: bool) -> None:
    """Fail early (before a long run) if ``path`` cannot be written: it exists and ``force``
    is not set, it is a directory, its directory is missing or is a file, or nothing can be
    created there. The last is probed by creating (and removing) an empty temporary file,
    which also holds for root, whom permission bits do not stop."""
    if path is None:
        return
    p = pathlib.Path(path)
    if p.is_dir():
        raise OutputPathError(f"{p} is a directory; give a file name for the output")
    if p.exists() and not force:
        raise OutputExistsError(
            f"{p} exists; pass --force to overwrite it or choose another path"
        )
    parent = p.parent
    if not parent.is_dir():
        blocking = next((a for a in [parent, *parent.parents] if a.exists()), None)
        if blocking is not None and not blocking.is_dir():
            raise OutputPathError(
                f"cannot write {p}: {blocking} is a file, not a directory; choose another path")
        raise OutputPathError(
            f"directory {parent} does not exist; create it or choose another path"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=parent)
    except OSError as e:
        raise OutputPathError(
            f"cannot create a file in {parent} ({e.strerror or type(e).__name__}); "
            "choose another path") from None
    os.close(fd)
    os.unlink(probe)


def write_text_atomic(path: str | os.PathLike[str], text: str | bytes, force: bool,
                      fsync: bool = False) -> None:
    """Write ``text`` to ``path`` atomically; never leaves a half-written file. With
    ``fsync``, the data and the rename reach the disk before it returns (a file that must
    survive the machine going down, not only the process)."""
    check_writable(path, force)
    p = pathlib.Path(path)
    mode = "wb" if isinstance(text, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync:
        _fsync_directory(p.parent)


def _fsync_directory(directory: pathlib.Path) -> None:
    """Make a rename in ``directory`` durable (where the platform allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(record: Record, path: str | os.PathLike[str], force: bool = False,
         encoder: ArrayEncoder = SERIAL) -> None:
    """Write a record as JSON, atomically, its arrays encoded by ``encoder``
    (``pipecheck.encoding.ParallelEncoder`` compresses the large ones on threads)."""
    try:
        text = record_to_json(record, encoder)
    except ValueError as e:  # pragma: no cover - would be a pipecheck bug
        raise PipecheckError(f"cannot serialize result: {e}") from None
    write_text_atomic(path, text, force)
