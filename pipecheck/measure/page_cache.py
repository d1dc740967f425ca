"""The data files a pipeline reads and the page cache: which files, how much of them is in
memory (residency), and evicting them for a cold measurement (``--cold``).

**Which files.** Found in the pipeline's Grain graph (``data_files``): every
``SourceMapDataset``'s source, unwrapped through the sources that wrap another
(pipecheck's ``IndexedSource``, tfds's data source, a ``grain.DataLoader``'s), down to an
ArrayRecord source, which knows its files (its read instructions). This is exact, costs no
I/O and works before anything runs, for every setting alike. Sampling ``/proc/<pid>/fd``
instead was rejected: ArrayRecord opens its files lazily, per worker process, so a sample at
one moment misses files not yet opened and catches unrelated ones (logs, outputs). A source
that does not say which files it reads (a user's own class) has no residency measured, and
``--cold`` refuses it in one line.

**Residency.** ``mincore(2)`` on a read-only shared mapping of each file, mapped in windows
of ``WINDOW_BYTES`` so the page vector stays small. A file that cannot be mapped leaves the
residency unknown (None), and so does a file on FUSE, which is not even opened: the kernel
drops a FUSE file's cached pages whenever it is opened (unless its server keeps them), so
looking would change what is measured. Read before a setting starts and after it ends,
outside every timed interval.

**Eviction.** ``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file, after ``fdatasync`` (the
kernel drops only pages already written back: a file just written keeps its dirty pages
otherwise). It cannot work where the kernel's page cache is not what serves repeated reads,
so ``cold_problem`` refuses those file systems up front, from the mount table
(``CANNOT_EVICT``): FUSE (its server, gcsfuse's file cache among them, keeps its own),
network file systems (the server and the client keep their own caches), tmpfs and ramfs
(the file is memory). Everywhere else eviction is verified: a file still more than
``COLD_RESIDENCY_MAX`` resident afterwards (pages another process maps or locks) is
refused too, rather than measured warm under the name cold.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import mmap
import os
from typing import Iterator, Sequence

import numpy as np

from pipecheck import mounts
from pipecheck.data.grain_pipeline import (
    BatchedExamples,
    InputPipeline,
    MainProcessMap,
    grain_graph,
)
from pipecheck.data.per_setting import PerSetting
from pipecheck.errors import ConfigError
from pipecheck.measure.resources import available_bytes
from pipecheck.records.dataloader import PageCache
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.units import short_path

WINDOW_BYTES = 1 << 30
"""A file is mapped 1 GiB at a time to read its residency: a page vector of 256 KiB."""

COLD_RESIDENCY_MAX = 0.05
"""After eviction at most 5% of the data files may stay in the page cache (the pages of a
file's index and the last pages read can stay mapped): more, and the measurement would not
be cold."""

NETWORK = ("a network file system, whose server and client keep caches of their own that "
           "posix_fadvise does not reach")
IN_MEMORY = "a file system in memory: the file has no storage to be read from"
CANNOT_EVICT: tuple[tuple[str, str], ...] = (
    ("fuse", "a FUSE file system, whose server keeps a cache of its own (gcsfuse's file "
             "cache, a network client's) that posix_fadvise does not reach"),
    ("virtiofs", "virtiofs, whose host keeps a cache of its own"),
    *((name, NETWORK) for name in ("nfs", "cifs", "smb", "ceph", "lustre", "gpfs", "9p")),
    ("tmpfs", IN_MEMORY),
    ("ramfs", IN_MEMORY),
)
"""File system types (a prefix of the mount table's type: ``fuse`` covers ``fuse.gcsfuse``)
where evicting a file's pages cannot make its next read come from storage, and why."""


@dataclasses.dataclass(frozen=True)
class DataFiles:
    """The files a pipeline's sources read, and how many records they hold."""

    paths: tuple[str, ...]
    records: int
    """Records of the sources together: one pass over the data reads this many."""

    @property
    def data_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in self.paths if os.path.exists(p))


NO_FILES = DataFiles((), 0)

NOT_OPENED = "fuse"
"""File systems whose files residency does not open (a prefix of the mount table's type):
FUSE drops a file's cached pages on every open unless its server says to keep them."""

_WRAPS = ("_source", "data_source", "_data_source")
"""Attributes under which a source (or a ``grain.DataLoader``) holds the source it wraps."""


def _paths_of(source: object, depth: int = 0) -> list[str]:
    """The files an ArrayRecord source reads (its read instructions, else its paths),
    looked for through the sources that wrap it."""
    instructions = getattr(source, "_read_instructions", None)
    if isinstance(instructions, (list, tuple)):
        names = [getattr(i, "filename", None) for i in instructions]
        return [str(n) for n in names if isinstance(n, str)]
    paths = getattr(source, "_paths", None)
    if isinstance(paths, (list, tuple)) and all(isinstance(p, str) for p in paths):
        return list(paths)
    for attr in _WRAPS if depth < 4 else ():
        inner = getattr(source, attr, None)
        if inner is not None and inner is not source:
            found = _paths_of(inner, depth + 1)
            if found:
                return found
    return []


def _graph_roots(dataset: InputPipeline) -> list[object]:
    """The Grain datasets to walk for sources (a pipeline built per setting at its default)."""
    if isinstance(dataset, MainProcessMap):
        return _graph_roots(dataset.dataset)
    if isinstance(dataset, BatchedExamples):
        return [dataset.examples]
    if isinstance(dataset, PerSetting):
        return [dataset.at(GrainSettings())]
    return [dataset]


def _sources(dataset: InputPipeline) -> Iterator[tuple[object, int]]:
    """Each data source of the pipeline, with its record count."""
    for root in _graph_roots(dataset):
        if not hasattr(root, "_parents"):  # a grain.DataLoader: its own data source
            source = getattr(root, "_data_source", None)
            if source is not None:
                yield source, _length(source)
            continue
        for node in grain_graph(root):
            source = getattr(node, "_source", None)
            if source is not None and type(node).__name__ == "SourceMapDataset":
                yield source, _length(node)


def _length(obj: object) -> int:
    try:
        return len(obj)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a source without a length reads as none
        return 0


def data_files(dataset: InputPipeline | None) -> DataFiles:
    """The files the pipeline's sources read (NO_FILES when none says; see the module
    docstring)."""
    if dataset is None:
        return NO_FILES
    paths: list[str] = []
    records = 0
    for source, n in _sources(dataset):
        found = [os.path.realpath(p) for p in _paths_of(source)]
        if found:
            paths += [p for p in found if p not in paths]
            records += n
    return DataFiles(tuple(paths), records)


# --- the mount table ----------------------------------------------------------------------
def filesystem_of(path: str, mountinfo: str) -> str:
    """The file system type of the mount holding ``path`` (an absolute, resolved path), from
    the text of ``/proc/self/mountinfo``: the longest mount point above it ("" if none)."""
    best, fstype = "", ""
    for m in mounts.parse(mountinfo):
        inside = path == m.point or path.startswith(m.point.rstrip("/") + "/")
        if inside and len(m.point) >= len(best):
            best, fstype = m.point, m.fstype
    return fstype


# --- residency: mincore on a mapping -------------------------------------------------------
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    return libc


_MAP_FAILED = ctypes.c_void_p(-1).value


def _resident_pages(libc: ctypes.CDLL, fd: int, offset: int, length: int, page: int
                    ) -> int | None:
    """Pages of ``length`` bytes at ``offset`` of ``fd`` in the page cache (None: the file
    cannot be mapped)."""
    addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr is None or addr == _MAP_FAILED:
        return None
    try:
        vec = ctypes.create_string_buffer((length + page - 1) // page)
        if libc.mincore(ctypes.c_void_p(addr), length, vec) != 0:
            return None
        return int(np.count_nonzero(np.frombuffer(vec.raw, np.uint8) & 1))
    finally:
        libc.munmap(ctypes.c_void_p(addr), length)


def file_residency(path: str, libc: ctypes.CDLL | None = None) -> tuple[int, int] | None:
    """``(resident bytes, size)`` of one file (None: it cannot be mapped or opened)."""
    libc = libc or _libc()
    page = mmap.PAGESIZE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        resident = 0
        for offset in range(0, size, WINDOW_BYTES):
            pages = _resident_pages(libc, fd, offset, min(WINDOW_BYTES, size - offset), page)
            if pages is None:
                return None
            resident += pages * page
        return min(resident, size), size
    finally:
        os.close(fd)


def residency(paths: Sequence[str], mountinfo: str | None = None) -> float | None:
    """Share of the files' bytes in the page cache (None: some file is on FUSE, cannot be
    mapped, or the files hold no bytes). A FUSE file is not opened to read it: the kernel
    drops a FUSE file's cached pages on every open unless its server keeps them, so reading
    residency there would change what is measured."""
    table = mounts.read() if mountinfo is None else mountinfo
    if any(filesystem_of(p, table).startswith(NOT_OPENED) for p in paths):
        return None
    libc = _libc()
    resident = total = 0
    for p in paths:
        r = file_residency(p, libc)
        if r is None:
            return None
        resident, total = resident + r[0], total + r[1]
    return resident / total if total else None


# --- eviction --------------------------------------------------------------------------------
def cannot_evict(fstype: str) -> str | None:
    """Why eviction cannot make reads of a file on ``fstype`` come from storage (None: it
    can, subject to the check afterwards)."""
    for prefix, why in CANNOT_EVICT:
        if fstype == prefix or fstype.startswith(prefix):
            return why
    return None


def cold_problem(files: DataFiles, mountinfo: str | None = None) -> str | None:
    """Why ``--cold`` cannot evict these files (one line with the fix), or None."""
    if not files.paths:
        return ("--cold cannot tell which files this pipeline reads (its source is not an "
                "ArrayRecord source pipecheck can see into); drop --cold, or read the data "
                "through grain.sources.ArrayRecordDataSource")
    table = mounts.read() if mountinfo is None else mountinfo
    for p in files.paths:
        fstype = filesystem_of(p, table)
        why = cannot_evict(fstype)
        if why is not None:
            return (f"--cold cannot evict {short_path(p)} from the page cache: it is on "
                    f"{fstype}, {why}; drop --cold, or copy the data to a local disk to "
                    "measure it cold")
    return None


def evict(files: DataFiles) -> float | None:
    """Evict the files' pages (``POSIX_FADV_DONTNEED``) and return the residency left; a
    ConfigError when the file system cannot be evicted or too much stays resident."""
    problem = cold_problem(files)
    if problem is not None:
        raise ConfigError(problem)
    for p in files.paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # pages not yet written back (a file just written) stay cached
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    left = residency(files.paths)
    if left is not None and left > COLD_RESIDENCY_MAX:
        raise ConfigError(
            f"--cold evicted the data files but {100 * left:.0f}% of them stayed in the page "
            f"cache (another process maps or locks them: {short_path(files.paths[0])} ...); "
            "stop that process or drop --cold")
    return left


@dataclasses.dataclass(frozen=True)
class CacheSeen:
    """What a setting's record says of the page cache: the residency around it, the records
    one pass over the data reads, and the memory available for the cache."""

    page_cache: PageCache
    records: int
    available_bytes: int


@dataclasses.dataclass
class CacheWatch:
    """One setting's page-cache readings: ``start()`` just before it (evicting the files
    first with ``cold``), ``seen()`` once it ended; both outside every timed interval. With
    no files known, neither reads anything."""

    files: DataFiles = NO_FILES
    cold: bool = False
    before: float | None = None

    def start(self) -> None:
        if self.files.paths:
            self.before = evict(self.files) if self.cold else residency(self.files.paths)

    def seen(self) -> CacheSeen | None:
        if not self.files.paths:
            return None
        page = PageCache(files=len(self.files.paths), data_bytes=self.files.data_bytes,
                         resident_before=self.before,
                         resident_after=residency(self.files.paths), evicted=self.cold)
        return CacheSeen(page, self.files.records, available_bytes())


NO_CACHE_WATCH = CacheWatch()
"""The watch of a setting whose data files are not known: reads nothing."""
