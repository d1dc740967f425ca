"""Record sources a text workload can read: the demo corpus, a tfds data set, ArrayRecord files.

``source`` (config key) is one of:

- ``demo``: the generated demo corpus (``pipecheck.data.demo_text``), built on first use;
- ``tfds:NAME``: a tfds data set already prepared on disk (``NAME`` may carry a config and
  version, ``NAME/CONFIG:1.0.0``), read with ``tfds.data_source`` from ``data_dir``;
- a path: one ArrayRecord file, a glob, or a directory of ``*.array_record*`` files, whose
  records are the text (UTF-8 bytes) of one document each.

Every source is wrapped in :class:`IndexedSource`, so a record that cannot be read fails
with its index and the source's name, also inside a Grain worker.
"""

from __future__ import annotations

import glob
import os
import pathlib
from typing import Mapping, Protocol, Union

import numpy as np

from pipecheck.errors import DataError, one_line

TFDS_PREFIX = "tfds:"

TextRecord = Union[str, bytes, np.ndarray, Mapping[str, Union[str, bytes, np.ndarray]]]
"""One record of a text source: the text itself, or tfds features (a mapping)."""


class RecordSource(Protocol):
    """A random-access source of records (``tfds.data_source``, Grain's
    ``ArrayRecordDataSource``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> TextRecord: ...


class IndexedSource:
    """A random-access source whose read errors name the record index and the source."""

    def __init__(self, source: RecordSource, label: str) -> None:
        self._source = source
        self.label = label

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: int) -> TextRecord:
        try:
            return self._source[index]
        except Exception as e:  # noqa: BLE001 - re-raised with the record index
            raise DataError(
                f"cannot read record {index} of {self.label}: {type(e).__name__}: {one_line(e)}"
            ) from None

    def __repr__(self) -> str:
        return f"IndexedSource({self.label})"


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {one_line(e, 200)}"


def open_tfds(name: str, split: str, data_dir: str) -> IndexedSource:
    # lazy: Grain, tfds imported where used, so `import pipecheck` stays light
    import tensorflow_datasets as tfds

    where = data_dir or "tfds's default data_dir"
    if data_dir and not pathlib.Path(data_dir).expanduser().is_dir():
        raise DataError(f"data_dir {data_dir} does not exist; point data_dir at the directory "
                        f"holding the prepared tfds data set {name!r}")
    try:
        source = tfds.data_source(name, split=split, data_dir=data_dir or None, download=False)
        len(source)
    except Exception as e:  # noqa: BLE001 - tfds raises many kinds here
        raise DataError(
            f"cannot open tfds data set {name!r} (split {split!r}) in {where} ({_short(e)}); "
            f"prepare it first (tfds build {name.split('/')[0]} --data_dir DIR "
            "--file_format array_record) or fix source/data_dir/split"
        ) from None
    return IndexedSource(source, f"tfds:{name}[{split}] in {where}")


def array_record_paths(spec: str) -> list[str]:
    """The files an ArrayRecord ``source`` names (a file, a glob, or a directory)."""
    p = pathlib.Path(spec).expanduser()
    if p.is_dir():
        files = sorted(str(f) for f in p.iterdir() if ".array_record" in f.name and f.is_file())
    elif any(ch in spec for ch in "*?["):
        files = sorted(glob.glob(os.path.expanduser(spec)))
    else:
        files = [str(p)] if p.is_file() else []
    if not files:
        raise DataError(f"no ArrayRecord file at {spec}; set source to an existing "
                        "file, glob or directory of *.array_record files (or demo)")
    return files


def open_array_record(spec: str) -> IndexedSource:
    import grain  # lazy: Grain imports JAX

    files = array_record_paths(spec)
    try:
        source = grain.sources.ArrayRecordDataSource(files)
        n = len(source)
        if n:
            source[0]
            source[n - 1]
    except Exception as e:  # noqa: BLE001 - a corrupt or foreign file
        raise DataError(f"{spec} is not a readable ArrayRecord file ({_short(e)}); "
                        "rewrite it, or point source at another path") from None
    if n == 0:
        raise DataError(f"{spec} holds no records")
    return IndexedSource(source, spec)


def open_records(source: str, *, num_docs: int, seed: int, data_dir: str, split: str,
                 progress: bool = True) -> IndexedSource:
    """The record source a ``source`` value names (see the module docstring)."""
    if source == "demo":
        from pipecheck.data import demo_text  # lazy: it imports tfds

        root = demo_text.corpus_dir(num_docs, seed, data_dir)
        return IndexedSource(demo_text.open_source(num_docs, seed, data_dir, progress),
                             f"the demo corpus in {root}")
    if source.startswith(TFDS_PREFIX):
        name = source[len(TFDS_PREFIX):]
        if not name:
            raise DataError("source tfds: needs a data set name, e.g. tfds:imdb_reviews")
        return open_tfds(name, split, data_dir)
    return open_array_record(source)
