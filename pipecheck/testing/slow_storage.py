"""How slow a slow mount is, as values: what each read costs (SlowStorage), which reads are
the slow tail, the server's read counters as a small text file (ReadStats), and the server's
command line (built here for the parent, parsed here by the server).

Pure: no FUSE, no processes. ``slow_mount.py`` starts the server; ``slow_fs.py`` is it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import sys

from pipecheck.errors import ConfigError

SERVER_MODULE = "pipecheck.testing.slow_mount"
"""The module the server runs as (``python -m``): also the command for manual use."""

STATS_FIELDS = ("reads", "tail_reads", "bytes_read")
"""The counters in a stats file, one ``NAME VALUE`` line each, in this order."""

STATS_NUMBER_WIDTH = 20
"""Each counter is written right-aligned in this many characters (a 64-bit count fits), so
the file keeps one size and the server rewrites it in place with one ``pwrite``."""


@dataclasses.dataclass(frozen=True)
class SlowStorage:
    """How each read through a slow mount is delayed, like remote storage.

    A read (one FUSE read request; the kernel splits a ``read(2)`` larger than its transfer
    size, 128 KiB by default, into several) takes ``latency_s`` plus ``size /
    bandwidth_bps`` when a bandwidth is set (per read, like one stream of a remote store:
    concurrent reads do not share it). In each block of ``tail_every`` consecutive reads
    exactly one, at a position drawn from ``tail_seed``, takes ``tail_factor`` times as
    long. Reads are served concurrently, so N concurrent reads wait side by side.
    Metadata (stat, listing, open) is not delayed.
    """

    latency_s: float
    """Seconds each read takes at least (0: no added latency)."""
    bandwidth_bps: float | None = None
    """Bytes per second of one read (None: no cap)."""
    tail_every: int = 0
    """One read in this many is slow (0: none)."""
    tail_factor: float = 1.0
    """How many times as long a slow-tail read takes."""
    direct_io: bool = True
    """True: every read goes to the server, as on a store without a cache. False: the
    kernel's page cache serves repeated reads of the same bytes within one open file."""
    tail_seed: int = 0
    """Which read of each block is slow is drawn from this: the same seed, the same reads."""

    def __post_init__(self) -> None:
        if not _number(self.latency_s) or self.latency_s < 0:
            raise ConfigError(f"latency_s must be a number of seconds >= 0, got "
                              f"{self.latency_s!r}")
        if self.bandwidth_bps is not None and (not _number(self.bandwidth_bps)
                                               or self.bandwidth_bps <= 0):
            raise ConfigError(f"bandwidth_bps must be bytes per second > 0 (or None: no cap), "
                              f"got {self.bandwidth_bps!r}")
        if not _whole(self.tail_every) or self.tail_every < 0:
            raise ConfigError(f"tail_every must be a whole number >= 0 (0: no slow tail), got "
                              f"{self.tail_every!r}")
        if not _number(self.tail_factor) or self.tail_factor < 1:
            raise ConfigError(f"tail_factor must be a number >= 1 (how many times as long a "
                              f"slow read takes), got {self.tail_factor!r}")
        if not isinstance(self.direct_io, bool):
            raise ConfigError(f"direct_io must be True or False, got {self.direct_io!r}")
        if not _whole(self.tail_seed):
            raise ConfigError(f"tail_seed must be a whole number, got {self.tail_seed!r}")

    def is_tail(self, read_index: int) -> bool:
        """Whether read number ``read_index`` (0 for the first read served) is a slow one:
        exactly one in each block of ``tail_every``."""
        if self.tail_every == 0:
            return False
        block, position = divmod(read_index, self.tail_every)
        return position == _tail_position(block, self.tail_every, self.tail_seed)

    def read_delay_s(self, size: int, tail: bool) -> float:
        """Seconds a read of ``size`` bytes takes (``tail``: a slow-tail read)."""
        delay = self.latency_s + (size / self.bandwidth_bps if self.bandwidth_bps else 0.0)
        return delay * self.tail_factor if tail else delay


def _number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tail_position(block: int, every: int, seed: int) -> int:
    """Which read of block ``block`` is the slow one: a hash of (seed, block), so it needs
    no state and is the same in every run."""
    digest = hashlib.blake2b(f"{seed}:{block}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % every


@dataclasses.dataclass(frozen=True)
class ReadStats:
    """What a slow mount's server has served so far."""

    reads: int = 0
    """Read requests served (finished, delay included)."""
    tail_reads: int = 0
    """Of those, the slow-tail ones."""
    bytes_read: int = 0
    """Bytes returned by those reads."""

    def to_text(self) -> str:
        """The stats file's text: ``NAME VALUE`` lines of fixed width."""
        return "".join(f"{name:<10} {getattr(self, name):>{STATS_NUMBER_WIDTH}}\n"
                       for name in STATS_FIELDS)

    @classmethod
    def from_text(cls, text: str) -> ReadStats:
        """Stats read back from :meth:`to_text`'s text; ValueError when it is not that (a
        file read while it was being written)."""
        pairs = [line.split() for line in text.splitlines()]
        if [p[0] for p in pairs if p] != list(STATS_FIELDS) or any(len(p) != 2 for p in pairs):
            raise ValueError(f"not a slow mount stats file: {text!r}")
        return cls(**{name: int(value) for name, value in pairs})


@dataclasses.dataclass(frozen=True)
class ServerArgs:
    """What the server process is told on its command line."""

    source: str
    """The directory served (absolute: the FUSE daemon changes its working directory)."""
    mountpoint: str
    """Where it is mounted (absolute)."""
    storage: SlowStorage
    """How slow its reads are."""
    stats_file: str | None
    """Where the server keeps its ReadStats (None: nowhere)."""
    parent_pid: int | None
    """The process whose end ends the server (None: the one that started it)."""


def server_command(args: ServerArgs) -> list[str]:
    """The server's command line: ``python -m pipecheck.testing.slow_mount SOURCE
    MOUNTPOINT --latency-ms ...`` (what :func:`parse_server_args` reads back)."""
    storage = args.storage
    argv = [sys.executable, "-m", SERVER_MODULE, args.source, args.mountpoint,
            "--latency-ms", repr(storage.latency_s * 1000)]
    if storage.bandwidth_bps is not None:
        argv += ["--bandwidth-bps", repr(storage.bandwidth_bps)]
    if storage.tail_every:
        argv += ["--tail-every", str(storage.tail_every), "--tail-factor",
                 repr(storage.tail_factor), "--tail-seed", str(storage.tail_seed)]
    if not storage.direct_io:
        argv.append("--page-cache")
    if args.stats_file is not None:
        argv += ["--stats-file", args.stats_file]
    if args.parent_pid is not None:
        argv += ["--parent-pid", str(args.parent_pid)]
    return argv


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {SERVER_MODULE}",
        description="Serve SOURCE read-only at MOUNTPOINT through FUSE, each read delayed like "
                    "remote storage. Runs until Ctrl-C, SIGTERM, `fusermount3 -u MOUNTPOINT` "
                    "or the end of the process that started it; then it unmounts.")
    parser.add_argument("source", help="the directory to serve")
    parser.add_argument("mountpoint", help="an existing empty directory to mount it on")
    parser.add_argument("--latency-ms", type=float, required=True,
                        help="milliseconds each read takes at least")
    parser.add_argument("--bandwidth-bps", type=float, default=None,
                        help="bytes per second of one read (default: no cap)")
    parser.add_argument("--tail-every", type=int, default=0,
                        help="one read in this many is slow (default 0: none)")
    parser.add_argument("--tail-factor", type=float, default=1.0,
                        help="how many times as long a slow read takes")
    parser.add_argument("--tail-seed", type=int, default=0,
                        help="which read of each block is slow is drawn from this")
    parser.add_argument("--page-cache", action="store_true",
                        help="let the kernel cache pages (default: every read reaches the "
                             "server, direct_io)")
    parser.add_argument("--stats-file", default=None,
                        help="keep the reads served in this file (NAME VALUE lines)")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="unmount when this process ends (default: the starting one)")
    return parser


def parse_server_args(argv: list[str]) -> ServerArgs:
    """The server's arguments (argparse exits with its usage on a malformed line; a bad
    value raises ConfigError)."""
    ns = _parser().parse_args(argv)
    storage = SlowStorage(ns.latency_ms / 1000, ns.bandwidth_bps, ns.tail_every,
                          ns.tail_factor, not ns.page_cache, ns.tail_seed)
    return ServerArgs(ns.source, ns.mountpoint, storage, ns.stats_file, ns.parent_pid)
