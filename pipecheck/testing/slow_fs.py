"""The slow mount's server: a read-only FUSE filesystem (mfusepy, multithreaded) serving a
directory with each read delayed as a SlowStorage says, its counters kept in a stats file.

Imported only in the server's own process (``python -m pipecheck.testing.slow_mount``):
mfusepy loads libfuse when imported. The server ends, and unmounts, on SIGTERM, SIGINT or
SIGHUP (libfuse's own handlers, installed while it serves), on ``fusermount3 -u``, and when
the process that started it ends (PR_SET_PDEATHSIG, and a thread watching the parent's pid).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import threading
import time
from typing import Any

import mfusepy

from pipecheck.errors import ConfigError, one_line
from pipecheck.testing.slow_storage import ReadStats, SlowStorage, parse_server_args

FS_NAME = "slow_mount"
"""The filesystem's name in the mount table (``mount | grep slow_mount``)."""

MAX_THREADS = 64
"""libfuse's worker threads: its default of 10 would cap how many reads wait side by side,
and a Grain pipeline with 16 read threads must not be held to 10."""

PARENT_POLL_S = 0.2
"""How often the watch thread checks that the starting process still lives (the fallback
where PR_SET_PDEATHSIG is not delivered)."""

PR_SET_PDEATHSIG = 1
"""prctl's option: the signal this process gets when its parent ends (<linux/prctl.h>)."""

_STAT_KEYS = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_ino", "st_blocks")
_TIME_KEYS = ("st_atime", "st_mtime", "st_ctime")


class ReadCounter:
    """Numbers reads as they start and counts them as they are served, rewriting the stats
    file in place after each one (one ``pwrite``, under the lock that orders them)."""

    def __init__(self, stats_file: str | None) -> None:
        self._lock = threading.Lock()
        self._started = 0
        self._stats = ReadStats()
        self._fd = (os.open(stats_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    if stats_file else None)
        self._write()

    def start(self) -> int:
        """The number of the read starting now (0 for the first)."""
        with self._lock:
            index = self._started
            self._started += 1
            return index

    def served(self, size: int, tail: bool) -> None:
        with self._lock:
            s = self._stats
            self._stats = ReadStats(s.reads + 1, s.tail_reads + tail, s.bytes_read + size)
            self._write()

    def _write(self) -> None:
        if self._fd is not None:
            os.pwrite(self._fd, self._stats.to_text().encode(), 0)


class SlowFS(mfusepy.Operations):  # type: ignore[misc]
    """The served directory, read-only, each read delayed. (Attributes are private: mfusepy
    takes any public attribute named like a FUSE operation, ``lock`` included, for one.)"""

    use_ns = True  # times in nanoseconds (mfusepy's float seconds are deprecated)

    def __init__(self, root: str, storage: SlowStorage, counter: ReadCounter) -> None:
        self._root = root
        self._storage = storage
        self._counter = counter
        self._began = False

    def _real(self, path: str) -> str:
        return os.path.join(self._root, path.lstrip("/"))

    def init(self, path: str) -> None:
        self._began = True
        print(f"{FS_NAME}: serving {self._root}", file=sys.stderr, flush=True)

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        try:
            st = os.stat(self._real(path))
        except OSError as err:
            raise mfusepy.FuseOSError(err.errno or errno.EIO) from None
        attrs: dict[str, Any] = {key: getattr(st, key) for key in _STAT_KEYS}
        attrs.update({key: getattr(st, key + "_ns") for key in _TIME_KEYS})
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        try:
            return [".", "..", *sorted(os.listdir(self._real(path)))]
        except OSError as err:
            raise mfusepy.FuseOSError(err.errno or errno.EIO) from None

    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise mfusepy.FuseOSError(errno.EROFS)
        try:
            return os.open(self._real(path), os.O_RDONLY)
        except OSError as err:
            raise mfusepy.FuseOSError(err.errno or errno.EIO) from None

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        started = time.monotonic()
        tail = self._storage.is_tail(self._counter.start())
        data = os.pread(fh, size, offset)
        left = self._storage.read_delay_s(len(data), tail) - (time.monotonic() - started)
        if left > 0:
            time.sleep(left)
        self._counter.served(len(data), tail)
        return data

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0


def _end_with(parent_pid: int) -> bool:
    """Have this process get SIGTERM (and so unmount) when ``parent_pid`` ends: prctl's
    death signal, and a thread watching the parent's pid where that signal does not come.
    False when the parent has already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # gone before the death signal was set
        return False

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)  # libfuse's handler ends the loop, unmounted

    threading.Thread(target=watch, name="slow-mount-parent-watch", daemon=True).start()
    return True


def main(argv: list[str]) -> int:
    """Serve until unmounted or signalled; 0 when it ended unmounted."""
    try:
        args = parse_server_args(argv)
    except ConfigError as err:
        print(f"{FS_NAME}: {err}", file=sys.stderr)
        return 2
    if not _end_with(args.parent_pid if args.parent_pid is not None else os.getppid()):
        print(f"{FS_NAME}: the process that started the server has already ended",
              file=sys.stderr)
        return 1
    fs = SlowFS(os.path.abspath(args.source), args.storage, ReadCounter(args.stats_file))
    mountpoint = os.path.abspath(args.mountpoint)
    try:
        mfusepy.FUSE(fs, mountpoint, foreground=True, ro=True, fsname=FS_NAME,
                     direct_io=args.storage.direct_io, max_threads=MAX_THREADS)
    except RuntimeError as err:
        # libfuse returns an error when a signal ended its loop; it has unmounted even then
        if not fs._began or os.path.ismount(mountpoint):
            print(f"{FS_NAME}: FUSE failed: {one_line(err)}", file=sys.stderr)
            return 1
    return 0
