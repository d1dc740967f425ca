"""The record base: frozen dataclasses with generic, type-hint-driven ``to_dict``/``from_dict``.

Nested records, tuples of records and optional fields round-trip without hand-written
code per class; unknown keys are refused. ``register_kind`` makes a top-level record
loadable by its ``kind`` (see ``store``)."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import math
import types
import typing
from typing import Any, Callable, ClassVar, Mapping, TypeVar

from pipecheck.errors import ResultFormatError
from pipecheck.records.codec import (
    SERIAL,
    ArrayEncoder,
    Floats,
    float_column_from_json,
    float_column_to_json,
    float_items,
    is_float_column,
)
from pipecheck.records.steps import StepTable, is_columnar_row
from pipecheck.records.versions import FORMAT_VERSION

T = TypeVar("T")


def _convert_in(tp: Any, value: Any, where: str = "value") -> Any:
    """Convert a JSON value into ``tp`` (dataclass, tuple[...], Optional, dict, scalar)."""
    return _converter(tp)(value, where)


Converter = Callable[[Any, str], Any]
"""Turns a JSON value (and where it is, for messages) into a field's type."""


@functools.cache
def _converter(tp: Any) -> Converter:
    """How a JSON value becomes a ``tp``, worked out once per type: process 0 of a pod
    reads 10,000 hosts' summaries, hundreds of thousands of fields."""
    convert = _converter_of(tp)
    if tp is float:  # non-finite floats are written as null
        return lambda value, where: math.nan if value is None else convert(value, where)
    return lambda value, where: None if value is None else convert(value, where)


def _identity(value: T, where: str) -> T:
    return value


def _converter_of(tp: Any) -> Converter:
    """``_converter`` for a value that is not null."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        if is_float_column(tp):
            return float_column_from_json
        return _converter(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        args = tuple(a for a in typing.get_args(tp) if a is not type(None))
        return _converter(args[0]) if len(args) == 1 else _identity
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return lambda value, where: from_dict(tp, value)
    if origin is StepTable:
        row = typing.get_args(tp)[0]
        return lambda value, where: StepTable.from_json(row, value)
    if origin is collections.abc.Sequence:  # steps by column, kept as a StepTable
        (inner,) = typing.get_args(tp)
        return lambda value, where: StepTable.from_json(inner, value)
    if origin is tuple:
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        if getattr(inner, "COLUMNAR", False):
            # the tuple API is kept for fields typed as a tuple of steps
            return lambda value, where: tuple(StepTable.from_json(inner, value))
        each = _converter(inner)
        if inner is float:  # raw samples: up to one per step, so no call per number
            return lambda value, where: (
                tuple(math.nan if v is None else float(v) for v in value)
                if isinstance(value, list) else tuple(each(v, "value") for v in value))
        if _converter_of(inner) is _identity:  # a null element stays null: no call each
            return lambda value, where: tuple(value)
        return lambda value, where: tuple(each(v, "value") for v in value)
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        each = _converter(args[1] if len(args) == 2 else Any)
        return lambda value, where: {k: each(v, "value") for k, v in value.items()}
    if tp is float:
        return lambda value, where: float(value) if isinstance(value, (int, float)) else value
    return _identity


def from_dict(cls: type[T], data: Mapping[str, object]) -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys are an error, missing ones default."""
    if not isinstance(data, (dict, Mapping)):  # dict first: the generic check is slow
        raise ResultFormatError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    record_type: type = cls  # a class object, hashable: the caches key on it
    fields = _field_converters(record_type)
    kwargs = {}
    derived: frozenset[str] = getattr(cls, "DERIVED_KEYS", frozenset())
    for key, value in data.items():
        if key in derived:  # computed from the fields again, not read
            continue
        if key not in fields:
            raise ResultFormatError(f"unexpected field {key!r} in {cls.__name__}")
        convert, where = fields[key]
        kwargs[key] = convert(value, where)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ResultFormatError(f"incomplete {cls.__name__}: {e}") from None


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    """Record class ``cls``'s resolved field types, once per class: resolving them costs
    ~0.3 ms, and a long run's record holds thousands of nested records (its events)."""
    return typing.get_type_hints(cls, include_extras=True)


@functools.cache
def _field_converters(cls: type) -> dict[str, tuple[Converter, str]]:
    """The fields ``cls(...)`` takes, each with its converter and its name for messages."""
    hints = _hints(cls)
    return {f.name: (_converter(hints[f.name]), f"{cls.__name__}.{f.name}")
            for f in dataclasses.fields(cls) if f.init}


@functools.cache
def _float_columns(cls: type) -> frozenset[str]:
    """The fields of record class ``cls`` typed ``FloatColumn`` (stored as encoded arrays)."""
    hints = _hints(cls)
    return frozenset(name for name, tp in hints.items() if is_float_column(tp))


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The names of dataclass ``cls``'s fields, in order (looked up once per class)."""
    return tuple(f.name for f in dataclasses.fields(cls))


@dataclasses.dataclass(frozen=True)
class _Layout:
    """How a dataclass's instances are written: its fields in order, those typed
    ``FloatColumn``, and whether it derives values to write first (``Record.derived``)."""

    names: tuple[str, ...]
    columns: frozenset[str]
    derives: bool


_LAYOUTS: dict[type, _Layout | None] = {}
"""Each class met by ``_convert_out``: its ``_Layout``, or None if not a dataclass."""


def _layout_of(kind: type) -> _Layout | None:
    if kind not in _LAYOUTS:
        is_instance_type = dataclasses.is_dataclass(kind) and isinstance(kind, type)
        _LAYOUTS[kind] = _Layout(
            _field_names(kind), _float_columns(kind),
            issubclass(kind, Record) and kind.derived is not Record.derived,
        ) if is_instance_type else None
    return _LAYOUTS[kind]


def _fields_out(value: Any, layout: _Layout, encoder: ArrayEncoder) -> dict[str, Any]:
    """A dataclass instance as a dict: derived values first, then each field (the plain
    values of most fields taken as they are, without a call each)."""
    out = ({k: _convert_out(v, encoder) for k, v in value.derived().items()}
           if layout.derives else {})
    for name in layout.names:
        v = getattr(value, name)
        kind = type(v)
        if kind is str or kind is int or kind is bool or v is None:
            out[name] = v
        elif kind is float:
            out[name] = v if math.isfinite(v) else None
        elif name in layout.columns:
            out[name] = float_column_to_json(v, encoder)
        else:
            out[name] = _convert_out(v, encoder)
    return out


def _convert_out(value: Any, encoder: ArrayEncoder) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most values: no checks
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    layout = _LAYOUTS[kind] if kind in _LAYOUTS else _layout_of(kind)
    if layout is not None:
        return _fields_out(value, layout, encoder)
    if isinstance(value, StepTable):  # a record without steps writes an empty list
        return value.to_json(encoder=encoder) if len(value) else []
    if isinstance(value, (tuple, list)) and value and is_columnar_row(value[0]):
        return StepTable.from_rows(type(value[0]), value).to_json(encoder=encoder)
    if kind is Floats or (isinstance(value, tuple) and value and type(value[0]) is float
                          and all(type(v) is float for v in value)):
        return float_items(value)  # raw samples: up to one per step, no call per number
    if isinstance(value, (tuple, list)):
        return [_convert_out(v, encoder) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _convert_out(v, encoder) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_dict(record: object, encoder: ArrayEncoder = SERIAL) -> dict[str, Any]:
    """A JSON-ready dict of a record (non-finite floats become null), its arrays encoded by
    ``encoder`` (``pipecheck.encoding.ParallelEncoder`` compresses the large ones on
    threads; the bytes are the same)."""
    try:
        out = _convert_out(record, encoder)
    except BaseException:
        encoder.discard()
        raise
    encoder.finish()
    assert isinstance(out, dict)
    return out


class Record:
    """Mixin for records: ``to_dict``/``from_dict`` from the type hints."""

    DERIVED_KEYS: ClassVar[frozenset[str]] = frozenset()
    """Keys a file holds besides the fields, computed from them (``derived``): written for
    readers, skipped on reading."""

    def derived(self) -> Mapping[str, object]:
        """The values of ``DERIVED_KEYS``, written before the fields."""
        return {}

    def to_dict(self, encoder: ArrayEncoder = SERIAL) -> dict[str, Any]:
        return to_dict(self, encoder)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, object]) -> T:
        return from_dict(cls, data)


class TopRecord(Record):
    """A record a file holds as a whole: its ``KIND`` (one spelling per class) and the
    format version are written before its fields, and skipped on reading (the version
    is checked, and an older one converted, before: ``versions.upgrade``)."""

    KIND: ClassVar[str]
    DERIVED_KEYS: ClassVar[frozenset[str]] = frozenset({"format_version", "kind"})

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def format_version(self) -> int:
        """The version this record is held in: the one this pipecheck writes (an older
        file is converted on reading)."""
        return FORMAT_VERSION

    def derived(self) -> Mapping[str, object]:
        return {"format_version": FORMAT_VERSION, "kind": self.KIND}


_KINDS: dict[str, type[TopRecord]] = {}


def register_kind(cls: type[T]) -> type[T]:
    """Class decorator: make ``load`` understand files whose ``kind`` is ``cls.KIND``."""
    assert issubclass(cls, TopRecord)
    _KINDS[cls.KIND] = cls
    return cls
