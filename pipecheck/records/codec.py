"""The array codec of records: how an array of numbers is stored in a file, and the
``FloatColumn`` values (raw samples, per-step rates) stored that way.

An encoded array is ``{"dtype": "int64" | "int32" | "float64", "zlib_base64": "..."}``: the
values' little-endian bytes, zlib-compressed, then base64 (``encode_array``,
``decode_array``). A record's writer encodes its arrays through an ``ArrayEncoder``: the
``SERIAL`` one here compresses each where it is met; one that compresses on threads, ahead
of a write or in parallel during it, lives above records (``pipecheck.encoding``): records
hold no threads and no state shared between writes.
"""

from __future__ import annotations

import base64
import collections.abc
import typing
import zlib
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Protocol,
    Sequence,
)

import numpy as np

from pipecheck.errors import ResultFormatError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

ZLIB_LEVEL = 1
"""zlib's fastest level: on a generated 1M-step MaxText log's columns, 0.6 s for 9.6 MB
against 5.8 s for 8.8 MB at the default level 6."""


class Base64Text(str):
    """Base64 text: ``A-Z``, ``a-z``, ``0-9``, ``+``, ``/`` and ``=`` alone, so JSON holds
    it between quotes as it is (``store.dumps`` writes it without scanning it for what to
    escape: megabytes a column)."""

    __slots__ = ()


def zlib_base64(data: np.ndarray) -> str:
    """The text of an encoded array of ``data`` (contiguous, little-endian: ``little_endian``)."""
    return Base64Text(base64.b64encode(zlib.compress(data.data, ZLIB_LEVEL)).decode("ascii"))



def little_endian(a: np.ndarray) -> np.ndarray:
    """``a``'s values as a contiguous little-endian array (``a`` itself where it is one):
    the bytes an encoded array holds."""
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))


def encode_array(a: np.ndarray) -> dict[str, str]:
    """An array as ``{"dtype", "zlib_base64"}``: little-endian bytes, zlib, base64."""
    return {"dtype": a.dtype.name, "zlib_base64": zlib_base64(little_endian(a))}


class ArrayEncoder(Protocol):
    """How a record's writer (``records.base.to_dict``) encodes its arrays. ``encode``
    returns ``encode_array``'s dict, whose text it may fill in only in ``finish``, which
    the writer calls once the whole record is converted (``discard`` instead, on an
    error). ``compress_ahead`` may start on arrays a later ``encode`` will be given (the
    same, unchanged arrays); the text is the same either way."""

    def compress_ahead(self, arrays: Iterable[np.ndarray]) -> None: ...

    def encode(self, a: np.ndarray) -> dict[str, str]: ...

    def finish(self) -> None: ...

    def discard(self) -> None: ...


class SerialEncoder:
    """The ``ArrayEncoder`` that compresses each array where it is met, on the writer's
    thread; nothing ahead, nothing left for ``finish``."""

    def compress_ahead(self, arrays: Iterable[np.ndarray]) -> None:
        """Nothing: each array is compressed when it is encoded."""

    def encode(self, a: np.ndarray) -> dict[str, str]:
        return encode_array(a)

    def finish(self) -> None:
        """Nothing left: every text was filled in by ``encode``."""

    def discard(self) -> None:
        """Nothing held."""


SERIAL: ArrayEncoder = SerialEncoder()
"""The writer's encoder unless it is given another (it holds no state)."""


_DTYPES = {"int64", "int32", "float64"}


class _Column:
    """The marker ``FloatColumn`` carries: the record base stores such a field as one
    encoded array (see ``is_float_column``)."""

    def __repr__(self) -> str:
        return "COLUMN"


COLUMN = _Column()

FloatColumn = Annotated[tuple[float, ...], COLUMN]
"""Up to one number per step (raw samples, per-step rates): a tuple of floats in memory,
one encoded array (``encode_array``) on disk, NaN for an absent value."""


def is_float_column(tp: object) -> bool:
    """Whether the type hint ``tp`` (read with ``include_extras=True``) is ``FloatColumn``."""
    return typing.get_origin(tp) is Annotated and COLUMN in getattr(tp, "__metadata__", ())


class Floats(collections.abc.Sequence):  # type: ignore[type-arg]
    """A ``FloatColumn`` value made from an array: a read-only copy of the array that reads,
    compares, hashes and adds like the tuple of its floats. That tuple is made only when a
    caller iterates, slices or hashes it, so a million-step column costs one array, not a
    million float objects; ``np.asarray`` returns the array itself through ``__array__``."""

    __slots__ = ("_array", "_floats")

    def __init__(self, arr: np.ndarray) -> None:
        self._array = arr
        self._floats: tuple[float, ...] | None = None

    def _items(self) -> tuple[float, ...]:
        if self._floats is None:
            self._floats = tuple(self._array.tolist())
        return self._floats

    def __len__(self) -> int:
        return int(self._array.shape[0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice) or self._floats is not None:
            return self._items()[index]
        if not -len(self) <= index < len(self):  # the tuple's message, not numpy's
            raise IndexError("tuple index out of range")
        return float(self._array[index])

    def __iter__(self) -> Iterator[float]:
        return iter(self._items())

    def __reversed__(self) -> Iterator[float]:
        return reversed(self._items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Floats):
            # a NaN is unequal to every NaN but itself, as in two tuples of distinct floats
            return self is other or bool(np.array_equal(self._array, other._array))
        if isinstance(other, tuple):
            return self._items() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items())

    def __add__(self, other: object) -> tuple[float, ...]:
        if isinstance(other, (tuple, Floats)):
            return self._items() + tuple(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[float, ...]:
        if isinstance(other, tuple):
            return other + self._items()
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self._items())

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        arr = self._array if dtype is None else self._array.astype(dtype, copy=False)
        return arr.copy() if copy else arr

    def __reduce__(self) -> tuple[Callable[[np.ndarray], Floats], tuple[np.ndarray]]:
        # The array alone, rebuilt by float_column: pickled as a tuple, a million-step
        # column would be a million floats (2x the bytes, 10x the time).
        return _float_column_of_own, (self._array,)


def float_column(values: ArrayLike) -> tuple[float, ...]:
    """A ``FloatColumn`` value of ``values`` (an array or any sequence of numbers): a
    ``Floats``, typed as the tuple it stands for."""
    arr = np.array(values, dtype=np.float64).reshape(-1)
    arr.flags.writeable = False
    return typing.cast("tuple[float, ...]", Floats(arr))


def _float_column_of_own(arr: np.ndarray) -> Floats:
    """A ``Floats`` of an array nobody else holds (one just unpickled): kept, not copied."""
    arr = np.asarray(arr, dtype=np.float64).reshape(-1)
    arr.flags.writeable = False
    return Floats(arr)


def float_items(value: ArrayLike) -> list[float | None]:
    """A float column's values as JSON holds a list of numbers: each non-finite one None."""
    arr = np.asarray(value, dtype=np.float64)
    finite = np.isfinite(arr)
    if finite.all():
        return arr.tolist()  # type: ignore[no-any-return]
    return [v if ok else None for v, ok in zip(arr.tolist(), finite.tolist(), strict=True)]


def float_column_to_json(values: Sequence[float], encoder: ArrayEncoder = SERIAL
                         ) -> dict[str, str]:
    """A ``FloatColumn`` value in its on-disk form (encoded by ``encoder``)."""
    return encoder.encode(np.asarray(values, dtype=np.float64))


def float_column_from_json(value: object, origin: str) -> tuple[float, ...]:
    """The inverse of ``float_column_to_json``."""
    return float_column(decode_array(value, origin))


def decode_array(value: object, origin: str) -> np.ndarray:
    """The inverse of ``encode_array``; a malformed value is a ResultFormatError."""
    if not isinstance(value, Mapping) or set(value) != {"dtype", "zlib_base64"}:
        raise ResultFormatError(f"{origin} is not an encoded array "
                                "({'dtype': ..., 'zlib_base64': ...})")
    if value["dtype"] not in _DTYPES:
        raise ResultFormatError(f"{origin} has dtype {value['dtype']!r}; expected one of "
                                f"{sorted(_DTYPES)}")
    try:
        raw = zlib.decompress(base64.b64decode(value["zlib_base64"], validate=True))
        return np.frombuffer(raw, dtype=np.dtype(value["dtype"]).newbyteorder("<")).astype(
            value["dtype"])
    except (ValueError, TypeError, zlib.error) as e:
        raise ResultFormatError(f"{origin} cannot be decoded ({e.__class__.__name__}: "
                                f"{e})") from None
