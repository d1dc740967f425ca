"""Versioned, frozen result records and their JSON files.

Every record is a frozen dataclass. ``to_dict``/``from_dict`` are generic and
driven by the type hints, so nested records, tuples of records and optional
fields round-trip without hand-written code per class. A file carries
``format_version`` and ``kind``; an unknown version or kind is a clear error.
Writes are atomic (temporary file in the same directory, then rename) and
refuse to overwrite an existing file unless ``force`` is set.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import tempfile
import types
import typing
from typing import Any, ClassVar, Mapping, Sequence, TypeVar

from pipecheck import stats
from pipecheck.errors import OutputExistsError, PipecheckError, ResultFormatError

FORMAT_VERSION = 1
"""Bumped whenever a field changes meaning or is removed; loaders refuse other versions."""

T = TypeVar("T")


def _convert_in(tp: Any, value: Any) -> Any:
    """Convert a JSON value into ``tp`` (dataclass, tuple[...], Optional, dict, scalar)."""
    if value is None:
        return math.nan if tp is float else None  # non-finite floats are written as null
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = tuple(a for a in typing.get_args(tp) if a is not type(None))
        return _convert_in(args[0], value) if len(args) == 1 else value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_dict(tp, value)
    if origin is tuple:
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        return tuple(_convert_in(inner, v) for v in value)
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        inner = args[1] if len(args) == 2 else Any
        return {k: _convert_in(inner, v) for k, v in value.items()}
    if tp is float and isinstance(value, (int, float)):
        return float(value)
    return value


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys are an error, missing ones default."""
    if not isinstance(data, Mapping):
        raise ResultFormatError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    names = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    for key, value in data.items():
        if key not in names:
            raise ResultFormatError(f"unexpected field {key!r} in {cls.__name__}")
        kwargs[key] = _convert_in(hints[key], value)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ResultFormatError(f"incomplete {cls.__name__}: {e}") from None


def _convert_out(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _convert_out(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_convert_out(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _convert_out(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (non-finite floats become null)."""
    out = _convert_out(record)
    assert isinstance(out, dict)
    return out


class Record:
    """Mixin for records: ``to_dict``/``from_dict`` from the type hints."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        return from_dict(cls, data)


@dataclasses.dataclass(frozen=True)
class Distribution(Record):
    """Raw samples (seconds) and the order statistics derived from them."""

    median_s: float
    mean_s: float
    p10_s: float
    p90_s: float
    p99_s: float
    iqr_s: float
    n: int
    samples_s: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Distribution:
        s = stats.summarize(samples)
        raw = tuple(float(x) for x in samples)
        return cls(s.median, s.mean, s.p10, s.p90, s.p99, s.iqr, s.n, raw)

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        return stats.median_ci(self.samples_s, confidence)


@dataclasses.dataclass(frozen=True)
class Finding(Record):
    """Something the user should know, in plain words, with the numbers behind it."""

    kind: str
    message: str
    numbers: Mapping[str, float] = dataclasses.field(default_factory=dict)
    location: str | None = None
    fix: str | None = None


@dataclasses.dataclass(frozen=True)
class StepRecord(Record):
    """One step: its interval between consecutive loss syncs, tags, and host spans in it."""

    step: int
    time_s: float
    tags: tuple[str, ...] = ()
    spans: Mapping[str, float] = dataclasses.field(default_factory=dict)
    loss: float | None = None


@dataclasses.dataclass(frozen=True)
class CompileInfo(Record):
    first_step_s: float
    compile_s: float
    train_step_compiles: int
    findings: tuple[Finding, ...] = ()


@dataclasses.dataclass(frozen=True)
class Throughput(Record):
    examples_per_s: float
    tokens_per_s: float | None = None
    tflops_per_s: float | None = None
    flops_per_step: float | None = None
    flops_source: str | None = None
    peak_memory_bytes: int | None = None


_KINDS: dict[str, type] = {}

KIND_MODULES = {
    "synthetic": "pipecheck.results",
    "dataloader": "pipecheck.dataloader",
    "compare": "pipecheck.compare",
    "monitor": "pipecheck.monitor",
    "diff": "pipecheck.diff",
    "imported": "pipecheck.maxtext",
}
"""Where each record kind is defined; ``load`` imports the module on demand."""


def register_kind(cls: type[T]) -> type[T]:
    """Class decorator: make ``load`` understand files whose ``kind`` is ``cls.KIND``."""
    _KINDS[cls.KIND] = cls  # type: ignore[attr-defined]
    return cls


@register_kind
@dataclasses.dataclass(frozen=True)
class SyntheticResult(Record):
    """``pipecheck synthetic``: the target step time (compute alone)."""

    KIND: ClassVar[str] = "synthetic"
    env: Mapping[str, Any]
    config: Mapping[str, Any]
    step_time: Distribution
    compile: CompileInfo
    throughput: Throughput
    warnings: tuple[str, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    format_version: int = FORMAT_VERSION
    kind: str = "synthetic"


def record_to_json(record: Any) -> str:
    return json.dumps(to_dict(record), indent=2, allow_nan=False) + "\n"


def load_dict(data: Mapping[str, Any], origin: str = "input") -> Any:
    """Turn a loaded JSON object into its record class, checking version and kind."""
    if not isinstance(data, Mapping) or "kind" not in data or "format_version" not in data:
        raise ResultFormatError(f"{origin} is not a pipecheck result (no kind/format_version)")
    version = data["format_version"]
    if version != FORMAT_VERSION:
        raise ResultFormatError(
            f"{origin} has format_version {version!r}; this pipecheck reads version "
            f"{FORMAT_VERSION} (re-run the measurement with this version)"
        )
    kind = data["kind"]
    if not isinstance(kind, str):
        raise ResultFormatError(f"{origin} is not a pipecheck result (kind is not a string)")
    if kind not in _KINDS and kind in KIND_MODULES:
        import importlib

        importlib.import_module(KIND_MODULES[kind])
    cls = _KINDS.get(kind)
    if cls is None:
        raise ResultFormatError(
            f"{origin} has unknown kind {kind!r}; known: {', '.join(sorted(KIND_MODULES))}"
        )
    try:
        return from_dict(cls, data)
    except ResultFormatError as e:
        raise ResultFormatError(f"{origin}: {e}") from None


def load(path: str | os.PathLike[str], expect: type[T] | None = None) -> T:
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
    return record  # type: ignore[no-any-return]


def check_writable(path: str | os.PathLike[str] | None, force: bool) -> None:
    """Fail early (before a long run) if ``path`` exists and ``force`` is not set."""
    if path is None:
        return
    p = pathlib.Path(path)
    if p.exists() and not force:
        raise OutputExistsError(
            f"{p} exists; pass --force to overwrite it or choose another path"
        )
    if not p.parent.exists():
        raise OutputExistsError(
            f"directory {p.parent} does not exist; create it or choose another path"
        )


def write_text_atomic(path: str | os.PathLike[str], text: str | bytes, force: bool) -> None:
    """Write ``text`` to ``path`` atomically; never leaves a half-written file."""
    check_writable(path, force)
    p = pathlib.Path(path)
    mode = "wb" if isinstance(text, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save(record: Any, path: str | os.PathLike[str], force: bool = False) -> None:
    """Write a record as JSON, atomically."""
    try:
        text = record_to_json(record)
    except ValueError as e:  # pragma: no cover - would be a pipecheck bug
        raise PipecheckError(f"cannot serialize result: {e}") from None
    write_text_atomic(path, text, force)
