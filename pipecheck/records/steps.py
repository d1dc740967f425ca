"""Per-step data by column: a million steps as a few numpy arrays, not a million objects.

``StepTable`` holds the steps of a run (``StepRecord`` or ``LogStep`` rows, any frozen
dataclass that sets ``COLUMNAR = True``) as one array per field and behaves like the
tuple of those rows: ``len``, indexing, slicing and iteration yield row objects,
built on demand, and it compares equal to a tuple of the same rows. Code that works on
whole runs reads the arrays instead (``column``, ``tag_mask``).

How each field of the row type is stored follows its type hint:

- ``int``, ``float``, ``float | None``, ``int | None``: one array (None is NaN);
- ``tuple[str, ...]`` (tags): the tag names once, then (row, name index) pairs, so the
  untagged majority of steps costs nothing;
- ``Mapping[str, float]`` (spans, metrics): one array per key, NaN where a step lacks it;
- anything else: a plain list.

On disk (``to_json``) each array is its little-endian bytes, zlib-compressed and
base64-encoded: ``{"dtype": "float64", "zlib_base64": "..."}`` (``records.codec``).
"""

from __future__ import annotations

import array
import base64
import collections.abc
import dataclasses
import functools
import math
import types
import typing
import zlib
from typing import (
    Any,
    Callable,
    Generic,
    Iterator,
    Mapping,
    Sequence,
    TypeVar,
    overload,
)

import numpy as np

from pipecheck.errors import ResultFormatError
from pipecheck.records.codec import (
    SERIAL,
    ZLIB_LEVEL,
    ArrayEncoder,
    decode_array,
    little_endian,
)

R = TypeVar("R")
S = TypeVar("S")

ITER_CHUNK = 65536
"""Rows converted to Python objects at a time while iterating: bounds the temporary lists."""

_SCALAR, _OPTIONAL, _TAGS, _MAP, _LIST = "scalar", "optional", "tags", "map", "list"


def _kind_of(tp: object) -> tuple[str, type[np.generic] | None]:
    """(storage kind, numpy dtype) of a row field from its type hint."""
    origin = typing.get_origin(tp)
    if tp is int:
        return _SCALAR, np.int64
    if tp is float:
        return _SCALAR, np.float64
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and args[0] in (int, float):
            return _OPTIONAL, np.float64
    if origin is tuple and typing.get_args(tp) in ((str, Ellipsis),):
        return _TAGS, None
    if origin in (collections.abc.Mapping, dict) or tp in (collections.abc.Mapping, dict):
        return _MAP, np.float64
    return _LIST, None


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    kind: str
    dtype: type[np.generic] | None
    python: type[int] | type[float]
    """int or float: the type a row gets for scalar and optional fields."""
    default: object
    """dataclasses.MISSING when the field has none."""


_SCHEMAS: dict[type, tuple[_Field, ...]] = {}


def schema(row_type: type) -> tuple[_Field, ...]:
    """The storage of each field of ``row_type``, from its type hints."""
    if row_type not in _SCHEMAS:
        hints = typing.get_type_hints(row_type)
        out = []
        for f in dataclasses.fields(row_type):
            kind, dtype = _kind_of(hints[f.name])
            python = int if dtype is np.int64 or int in typing.get_args(hints[f.name]) else float
            if f.default is not dataclasses.MISSING:
                default: object = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = dataclasses.MISSING
            out.append(_Field(f.name, kind, dtype, python, default))
        _SCHEMAS[row_type] = tuple(out)
    return _SCHEMAS[row_type]


def is_columnar_row(value: object) -> bool:
    """True for an instance of a row type that is stored by column (``COLUMNAR = True``)."""
    return bool(getattr(type(value), "COLUMNAR", False)) and dataclasses.is_dataclass(value)


@dataclasses.dataclass(frozen=True)
class _Tags:
    """A tags field: ``names`` once, then per (row, name) pair, ordered by row."""

    names: tuple[str, ...] = ()
    rows: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    ids: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))

    def take(self, index: np.ndarray, n: int) -> _Tags:
        """Tags of the rows ``index`` (sorted or not), renumbered 0..len(index)-1."""
        if not self.rows.size:
            return self
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[index] = np.arange(index.size)
        new = new_of_old[self.rows]
        keep = new >= 0
        order = np.argsort(new[keep], kind="stable")
        return _Tags(self.names, new[keep][order], self.ids[keep][order])


class StepTable(Sequence[R], Generic[R]):
    """The steps of a run, stored by column; a read-only sequence of ``row_type`` rows."""

    __slots__ = ("row_type", "_n", "_columns", "_tags", "_maps", "_lists")

    def __init__(self, row_type: type[R], n: int, columns: Mapping[str, np.ndarray],
                 tags: Mapping[str, _Tags] | None = None,
                 maps: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                 lists: Mapping[str, Sequence[object]] | None = None) -> None:
        self.row_type = row_type
        self._n = int(n)
        self._columns = dict(columns)
        self._tags = dict(tags or {})
        self._maps = {k: dict(v) for k, v in (maps or {}).items()}
        self._lists = {k: list(v) for k, v in (lists or {}).items()}
        for f in schema(row_type):
            if f.kind in (_SCALAR, _OPTIONAL) and f.name not in self._columns:
                if f.default is dataclasses.MISSING:
                    raise ResultFormatError(f"steps of {row_type.__name__} lack {f.name!r}")
                fill = math.nan if f.default is None else f.default
                self._columns[f.name] = np.full(self._n, fill, dtype=f.dtype)
            elif f.kind == _TAGS:
                self._tags.setdefault(f.name, _Tags())
            elif f.kind == _MAP:
                self._maps.setdefault(f.name, {})
            elif f.kind == _LIST and f.name not in self._lists:
                if f.default is dataclasses.MISSING:
                    raise ResultFormatError(f"steps of {row_type.__name__} lack {f.name!r}")
                self._lists[f.name] = [f.default] * self._n
        for name, col in self._columns.items():
            if len(col) != self._n:
                raise ResultFormatError(f"steps column {name!r} has {len(col)} values, "
                                        f"expected {self._n}")

    # --- building ---------------------------------------------------------------------

    @classmethod
    def from_rows(cls, row_type: type[R], rows: Sequence[object]) -> StepTable[R]:
        """The table of ``rows`` (row objects of ``row_type`` or any with its attributes)."""
        builder = StepTableBuilder(row_type)
        for r in rows:
            builder.append(**{f.name: getattr(r, f.name) for f in schema(row_type)
                              if hasattr(r, f.name)})
        return builder.build()

    def as_rows_of(self, row_type: type[S]) -> StepTable[S]:
        """The same steps as rows of ``row_type``, sharing the arrays (fields it lacks are
        dropped, fields it adds take their defaults)."""
        names = {f.name for f in schema(row_type)}
        return StepTable(
            row_type, self._n,
            {k: v for k, v in self._columns.items() if k in names},
            {k: v for k, v in self._tags.items() if k in names},
            {k: v for k, v in self._maps.items() if k in names},
            {k: v for k, v in self._lists.items() if k in names},
        )

    def take(self, index: np.ndarray | Sequence[int]) -> StepTable[R]:
        """The rows at ``index`` (integer positions, in that order)."""
        idx = np.asarray(index, dtype=np.int64)
        if idx.size and (idx.min() < -self._n or idx.max() >= self._n):
            raise IndexError("step index out of range")
        idx = np.where(idx < 0, idx + self._n, idx)
        return StepTable(
            self.row_type, idx.size,
            {k: v[idx] for k, v in self._columns.items()},
            {k: t.take(idx, self._n) for k, t in self._tags.items()},
            {k: {m: c[idx] for m, c in cols.items()} for k, cols in self._maps.items()},
            {k: [v[i] for i in idx.tolist()] for k, v in self._lists.items()},
        )

    def with_tags(self, tags: Mapping[int, tuple[str, ...]], field: str = "tags") -> StepTable[R]:
        """A copy whose rows at the given positions carry these tags instead of their own."""
        old = self._tags.get(field, _Tags())
        keep = ~np.isin(old.rows, np.fromiter(tags, np.int64, len(tags)))
        names = list(old.names)
        rows, ids = [old.rows[keep]], [old.ids[keep]]
        new_rows, new_ids = [], []
        for row, row_tags in tags.items():
            for t in row_tags:
                if t not in names:
                    names.append(t)
                new_rows.append(row)
                new_ids.append(names.index(t))
        rows.append(np.asarray(new_rows, np.int64))
        ids.append(np.asarray(new_ids, np.int32))
        all_rows, all_ids = np.concatenate(rows), np.concatenate(ids)
        order = np.argsort(all_rows, kind="stable")
        new = dict(self._tags)
        new[field] = _Tags(tuple(names), all_rows[order], all_ids[order])
        return StepTable(self.row_type, self._n, self._columns, new, self._maps, self._lists)

    def with_map_columns(self, field: str, columns: Mapping[str, np.ndarray]) -> StepTable[R]:
        """A copy whose mapping ``field`` (``spans``) has these keys' arrays instead of its
        own (one value a row, NaN where a row lacks the key)."""
        for name, col in columns.items():
            if len(col) != self._n:
                raise ValueError(f"{field}[{name!r}] has {len(col)} values, expected {self._n}")
        maps = dict(self._maps)
        maps[field] = {**maps.get(field, {}), **{k: np.asarray(v, float)
                                                 for k, v in columns.items()}}
        return StepTable(self.row_type, self._n, self._columns, self._tags, maps, self._lists)

    def per_step_arrays(self) -> list[np.ndarray]:
        """The arrays ``to_json`` encodes as they are: the scalar columns and the mappings'."""
        return [*self._columns.values(), *(c for m in self._maps.values() for c in m.values())]

    # --- columns ----------------------------------------------------------------------

    def column(self, name: str) -> np.ndarray:
        """The array of a scalar field (None stored as NaN). Read-only."""
        try:
            col = self._columns[name]
        except KeyError:
            raise KeyError(f"{self.row_type.__name__} has no column {name!r}") from None
        view = col.view()
        view.flags.writeable = False
        return view

    def map_columns(self, field: str) -> dict[str, np.ndarray]:
        """Per key of a mapping field (``spans``, ``metrics``): its array, NaN where absent."""
        return dict(self._maps.get(field, {}))

    def tag_names(self, field: str = "tags") -> tuple[str, ...]:
        t = self._tags.get(field, _Tags())
        return tuple(t.names[i] for i in sorted(set(t.ids.tolist())))

    def tag_mask(self, tags: Sequence[str] | str, field: str = "tags") -> np.ndarray:
        """Boolean array: which rows carry any of ``tags``."""
        wanted = {tags} if isinstance(tags, str) else set(tags)
        t = self._tags.get(field, _Tags())
        ids = [i for i, name in enumerate(t.names) if name in wanted]
        mask = np.zeros(self._n, dtype=bool)
        if ids and t.rows.size:
            mask[t.rows[np.isin(t.ids, ids)]] = True
        return mask

    def tagged(self, field: str = "tags") -> dict[int, tuple[str, ...]]:
        """Row position -> its tags, for the rows that have any."""
        t = self._tags.get(field, _Tags())
        out: dict[int, list[str]] = {}
        for row, i in zip(t.rows.tolist(), t.ids.tolist(), strict=True):
            out.setdefault(row, []).append(t.names[i])
        return {k: tuple(v) for k, v in out.items()}

    # --- the sequence -----------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> R: ...

    @overload
    def __getitem__(self, i: slice) -> StepTable[R]: ...

    def __getitem__(self, i: int | slice) -> R | StepTable[R]:
        if isinstance(i, slice):
            return self.take(np.arange(self._n)[i])
        if not -self._n <= i < self._n:
            raise IndexError("step index out of range")
        i = i + self._n if i < 0 else i
        return next(self._rows(i, i + 1))

    def __iter__(self) -> Iterator[R]:
        for start in range(0, self._n, ITER_CHUNK):
            yield from self._rows(start, min(self._n, start + ITER_CHUNK))

    def _rows(self, start: int, stop: int) -> Iterator[R]:
        fields = schema(self.row_type)
        values: list[list[object]] = []
        for f in fields:
            if f.kind in (_SCALAR, _OPTIONAL):
                raw = self._columns[f.name][start:stop].tolist()
                if f.kind == _OPTIONAL:
                    conv = f.python
                    raw = [None if x != x else conv(x) for x in raw]
                values.append(raw)
            elif f.kind == _TAGS:
                t = self._tags[f.name]
                lo, hi = np.searchsorted(t.rows, [start, stop])
                per_row: dict[int, list[str]] = {}
                for row, k in zip(t.rows[lo:hi].tolist(), t.ids[lo:hi].tolist(), strict=True):
                    per_row.setdefault(row - start, []).append(t.names[k])
                values.append([tuple(per_row.get(j, ())) for j in range(stop - start)])
            elif f.kind == _MAP:
                cols = [(k, c[start:stop].tolist()) for k, c in self._maps[f.name].items()]
                values.append([{k: c[j] for k, c in cols if c[j] == c[j]}
                               for j in range(stop - start)])
            else:
                values.append(self._lists[f.name][start:stop])
        names = [f.name for f in fields]
        make: Callable[..., R] = self.row_type
        for row_values in zip(*values, strict=True):
            yield make(**dict(zip(names, row_values, strict=True)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (StepTable, tuple, list)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepTable[{self.row_type.__name__}]({self._n} steps)"

    # --- JSON -------------------------------------------------------------------------

    def to_json(self, encode: Callable[[str, np.ndarray], dict[str, str]] | None = None,
                encoder: ArrayEncoder = SERIAL) -> dict[str, Any]:
        """The columnar JSON form. ``encode(name, per-step array)`` encodes the per-step
        columns (default: ``encoder``, which also encodes the tags' arrays)."""
        enc = encode or (lambda _, a: encoder.encode(a))
        cols: dict[str, Any] = {}
        for f in schema(self.row_type):
            if f.kind in (_SCALAR, _OPTIONAL):
                cols[f.name] = enc(f.name, self._columns[f.name])
            elif f.kind == _TAGS:
                t = self._tags[f.name]
                cols[f.name] = {"names": list(t.names), "rows": encoder.encode(t.rows),
                                "ids": encoder.encode(t.ids)}
            elif f.kind == _MAP:
                cols[f.name] = {k: enc(f"{f.name}.{k}", c)
                                for k, c in self._maps[f.name].items()}
            else:
                cols[f.name] = list(self._lists[f.name])
        return {"n": self._n, "columns": cols}

    @classmethod
    def from_json(cls, row_type: type[R], data: object, origin: str = "steps") -> StepTable[R]:
        """Read the columnar form (or ``[]``: a record without steps writes an empty list)."""
        if isinstance(data, list) and not data:
            return StepTableBuilder(row_type).build()
        if not isinstance(data, Mapping) or set(data) != {"n", "columns"}:
            raise ResultFormatError(f"{origin} is not {{'n': ..., 'columns': {{...}}}}")
        n, raw = data["n"], data["columns"]
        if not isinstance(n, int) or n < 0 or not isinstance(raw, Mapping):
            raise ResultFormatError(f"{origin}: 'n' must be a count and 'columns' an object")
        fields = {f.name: f for f in schema(row_type)}
        unknown = set(raw) - set(fields)
        if unknown:
            raise ResultFormatError(f"unexpected column(s) {sorted(unknown)} in {origin}")
        columns, tags, maps, lists = {}, {}, {}, {}
        try:
            for name, value in raw.items():
                f = fields[name]
                where = f"{origin}.{name}"
                if f.kind in (_SCALAR, _OPTIONAL):
                    columns[name] = decode_array(value, where).astype(f.dtype, copy=False)
                    if columns[name].size != n:
                        raise ResultFormatError(f"{where} has {columns[name].size} values, "
                                                f"expected {n}")
                elif f.kind == _TAGS:
                    rows = decode_array(value["rows"], where).astype(np.int64, copy=False)
                    ids = decode_array(value["ids"], where).astype(np.int32, copy=False)
                    names = tuple(str(x) for x in value["names"])
                    if rows.size != ids.size or (ids.size and (ids.min() < 0
                                                               or ids.max() >= len(names))):
                        raise ResultFormatError(f"{where}: rows and ids do not match names")
                    if rows.size and (rows.min() < 0 or rows.max() >= n):
                        raise ResultFormatError(f"{where}: a row is out of range")
                    tags[name] = _Tags(names, rows, ids)
                elif f.kind == _MAP:
                    maps[name] = {str(k): decode_array(v, f"{where}.{k}").astype(np.float64)
                                  for k, v in value.items()}
                    for k, v in maps[name].items():
                        if v.size != n:
                            raise ResultFormatError(f"{where}.{k} has {v.size} values, "
                                                    f"expected {n}")
                else:
                    if not isinstance(value, list) or len(value) != n:
                        raise ResultFormatError(f"{where} must be a list of {n} values")
                    lists[name] = value
        except (KeyError, TypeError, AttributeError) as e:
            raise ResultFormatError(f"{origin}: malformed column ({e.__class__.__name__}: "
                                    f"{e})") from None
        return cls(row_type, n, columns, tags, maps, lists)


def _put_int(col: array.array[int], v: Any) -> None:
    col.append(int(v))


def _put_float(col: array.array[float], v: Any) -> None:
    col.append(float(v))


def _put_optional(col: array.array[float], v: Any) -> None:
    col.append(math.nan if v is None else float(v))


class StepTableBuilder(Generic[R]):
    """Appends rows field by field into compact arrays (8 bytes a number, not a Python
    object); ``build`` makes the table. Used by parsers that stream a long log."""

    def __init__(self, row_type: type[R]) -> None:
        self.row_type = row_type
        self._fields = schema(row_type)
        self._n = 0
        self._scalars: dict[str, array.array[Any]] = {
            f.name: array.array("q" if f.dtype is np.int64 else "d")
            for f in self._fields if f.kind in (_SCALAR, _OPTIONAL)}
        self._tag_names: dict[str, dict[str, int]] = {
            f.name: {} for f in self._fields if f.kind == _TAGS}
        self._tag_rows: dict[str, array.array[int]] = {
            f.name: array.array("q") for f in self._fields if f.kind == _TAGS}
        self._tag_ids: dict[str, array.array[int]] = {
            f.name: array.array("i") for f in self._fields if f.kind == _TAGS}
        self._maps: dict[str, dict[str, array.array[float]]] = {
            f.name: {} for f in self._fields if f.kind == _MAP}
        self._lists: dict[str, list[object]] = {f.name: [] for f in self._fields
                                             if f.kind == _LIST}
        self._plan = self._make_plan()

    def __len__(self) -> int:
        return self._n

    def append(self, **values: Any) -> None:
        """Add one row; fields not given take their defaults (a missing required field
        is a TypeError). Called once per step of a long log: one closure per field, made
        once in ``_plan``, keeps it cheap."""
        for name, default, put in self._plan:
            v = values.get(name, default)
            if v is dataclasses.MISSING:
                raise TypeError(f"missing step field {name!r}")
            put(v)
        self._n += 1

    def _make_plan(self) -> list[tuple[str, Any, Callable[[Any], None]]]:
        plan = []
        for f in self._fields:
            put: Callable[[Any], None]
            if f.kind == _SCALAR:
                col = self._scalars[f.name]
                put = functools.partial(_put_int if col.typecode == "q" else _put_float, col)
            elif f.kind == _OPTIONAL:
                put = functools.partial(_put_optional, self._scalars[f.name])
            elif f.kind == _TAGS:
                put = functools.partial(self._put_tags, f.name)
            elif f.kind == _MAP:
                put = functools.partial(self._put_map, f.name)
            else:
                put = self._lists[f.name].append
            plan.append((f.name, f.default, put))
        return plan

    def _put_tags(self, name: str, tags: Sequence[str] | None) -> None:
        if tags:
            ids = self._tag_names[name]
            for t in tags:
                self._tag_rows[name].append(self._n)
                self._tag_ids[name].append(ids.setdefault(str(t), len(ids)))

    def _put_map(self, name: str, values: Mapping[str, float] | None) -> None:
        cols = self._maps[name]
        row = self._n
        for k, x in (values or {}).items():
            col = cols.get(k)
            if col is None:
                col = cols[k] = array.array("d", [math.nan]) * row
            col.append(math.nan if x is None else float(x))
        if values is None or len(values) < len(cols):
            for col in cols.values():
                if len(col) == row:
                    col.append(math.nan)

    def build(self) -> StepTable[R]:
        n = self._n
        columns = {k: np.frombuffer(v, dtype=np.int64 if v.typecode == "q" else np.float64)
                   .copy() if len(v) else np.zeros(0, np.int64 if v.typecode == "q"
                                                   else np.float64)
                   for k, v in self._scalars.items()}
        tags = {k: _Tags(tuple(self._tag_names[k]),
                         np.asarray(self._tag_rows[k], dtype=np.int64),
                         np.asarray(self._tag_ids[k], dtype=np.int32))
                for k in self._tag_names}
        maps = {k: {m: np.asarray(c, dtype=np.float64) for m, c in cols.items()}
                for k, cols in self._maps.items()}
        return StepTable(self.row_type, n, columns, tags, maps, self._lists)


def as_step_table(steps: Sequence[R], row_type: type[R]) -> StepTable[R]:
    """Steps as the one shape records hold them in: a StepTable (a tuple or list of rows,
    as a record may be built from, becomes one). Called only where a record is built
    (``__post_init__``); readers use the table's own API."""
    return steps if isinstance(steps, StepTable) else StepTable.from_rows(row_type, steps)


def no_steps(row_type: type[R]) -> Callable[[], StepTable[R]]:
    """A record's default ``steps``: an empty table of ``row_type``."""
    return lambda: StepTable.from_rows(row_type, ())


def concat(tables: Sequence[StepTable[R]]) -> StepTable[R]:
    """The rows of ``tables`` one after the other (all of one row type), as one table; a
    mapping key one table lacks is NaN (absent) in its rows."""
    if not tables:
        raise ValueError("concat needs at least one table")
    if len(tables) == 1:
        return tables[0]
    first = tables[0]
    sizes = [len(t) for t in tables]
    n = sum(sizes)
    columns = {k: np.concatenate([t._columns[k] for t in tables]) for k in first._columns}
    tags: dict[str, _Tags] = {}
    for name in first._tags:
        names: list[str] = []
        rows, ids = [], []
        offset = 0
        for t, size in zip(tables, sizes, strict=True):
            part = t._tags[name]
            for tag in part.names:
                if tag not in names:
                    names.append(tag)
            if part.rows.size:
                remap = np.asarray([names.index(x) for x in part.names], dtype=np.int32)
                rows.append(part.rows + offset)
                ids.append(remap[part.ids])
            offset += size
        tags[name] = (_Tags(tuple(names), np.concatenate(rows), np.concatenate(ids))
                      if rows else _Tags(tuple(names)))
    maps: dict[str, dict[str, np.ndarray]] = {}
    for name in first._maps:
        keys = list(dict.fromkeys(k for t in tables for k in t._maps[name]))
        maps[name] = {k: np.concatenate([t._maps[name].get(k, np.full(size, math.nan))
                                         for t, size in zip(tables, sizes, strict=True)])
                      for k in keys}
    lists = {k: [v for t in tables for v in t._lists[k]] for k in first._lists}
    return StepTable(first.row_type, n, columns, tags, maps, lists)


ENCODE_CHUNK = 1024
"""Step numbers per piece a ``ChunkEncoder`` compresses and keeps (1024 steps: 8 KB a
column)."""

_ZLIB_HEADER = b"\x78\x01"
_ZLIB_FINAL_BLOCK = b"\x03\x00"
"""An empty last deflate block (fixed Huffman, end of block): ends a stream whose blocks were
each flushed to a byte boundary."""


def _deflate_piece(data: bytes) -> bytes:
    """Raw deflate of ``data``, flushed so that it can be followed by any other piece."""
    c = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)


class ChunkEncoder:
    """Encodes a StepTable as ``StepTable.to_json`` does (each array decodes with
    ``decode_array``), compressing only what it has not compressed before: each column is
    cut where the step number crosses a multiple of ``ENCODE_CHUNK``, every piece is
    deflated on its own and concatenated into one zlib stream, and a piece whose bytes are
    those it compressed for the same place last time is reused. Writing a growing (or
    sliding) window of steps again costs the new pieces and the partial ones at its ends."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int], tuple[bytes, bytes]] = {}
        self._used: dict[tuple[str, int], tuple[bytes, bytes]] = {}
        self.compressed_bytes = 0
        """Bytes compressed so far."""
        self.column_bytes = 0
        """Bytes of the columns encoded so far (compressed now or reused)."""

    def table_json(self, table: StepTable[R]) -> dict[str, Any]:
        """``table.to_json()``, with the cache."""
        n = len(table)
        steps = table._columns.get("step")
        numbers = steps if steps is not None else np.arange(n)
        chunk = numbers // ENCODE_CHUNK
        cuts = [0, *(np.flatnonzero(np.diff(chunk)) + 1).tolist(), n]
        pieces = [(int(chunk[a]), a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
        self._used = {}
        out = table.to_json(lambda name, a: self.encode(name, a, pieces))
        self._cache = self._used
        return out

    def encode(self, name: str, a: np.ndarray, pieces: Sequence[tuple[int, int, int]]
               ) -> dict[str, str]:
        """One column (``encode_array``'s form) cut into ``pieces`` (chunk id, start, stop)."""
        arr = np.ascontiguousarray(a)
        raw = little_endian(arr).tobytes()
        size = arr.dtype.itemsize
        self.column_bytes += len(raw)
        body = []
        for chunk, start, stop in pieces:
            data = raw[start * size:stop * size]
            key = (name, chunk)
            hit = self._cache.get(key)
            if hit is None or hit[0] != data:
                hit = (data, _deflate_piece(data))
                self.compressed_bytes += len(data)
            self._used[key] = hit
            body.append(hit[1])
        stream = b"".join([_ZLIB_HEADER, *body, _ZLIB_FINAL_BLOCK,
                           zlib.adler32(raw).to_bytes(4, "big")])
        return {"dtype": arr.dtype.name, "zlib_base64": base64.b64encode(stream).decode("ascii")}
