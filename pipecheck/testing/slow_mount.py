"""A directory served read-only through a real FUSE mount that is slow like remote storage
(a network filesystem, gcsfuse without its cache), for tests and benchmarks.

``with mounted(source_dir, mountpoint, SlowStorage(latency_s=0.02)) as mount:`` starts the
server in a child process (``python -m pipecheck.testing.slow_mount SOURCE MOUNTPOINT
--latency-ms 20``, also the command for manual use), waits until the mount is up and always
unmounts on the way out: on an exception, on KeyboardInterrupt, and, from the server itself,
on SIGTERM/SIGINT or when the starting process dies. ``mount.reads`` (``mount.stats()``)
reads the server's counters from a stats file it rewrites after each read.

Linux only; needs /dev/fuse, fusermount3 and libfuse 3 (``apt-get install -y fuse3``) and
the mfusepy binding (``pip install 'pipecheck[storage]'``). Without them FuseUnavailable
says what is missing. The binding is imported only in the server's process.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from pipecheck import mounts
from pipecheck.errors import ConfigError, PipecheckError, one_line
from pipecheck.testing.slow_storage import ReadStats, ServerArgs, SlowStorage, server_command

__all__ = ["FuseUnavailable", "Mount", "ReadStats", "SlowMountError", "SlowStorage",
           "fuse_mounts_under", "fuse_problem", "mounted"]

INSTALL_FIX = "apt-get install -y fuse3 && pip install mfusepy"
"""What installs everything a slow mount needs on Debian/Ubuntu, as root."""

FUSERMOUNT = "fusermount3"
"""libfuse 3's unmount helper."""

MOUNT_TIMEOUT_S = 20.0
"""How long the server may take to be mounted: a Python start-up and the mfusepy import
(well under a second alone, a few seconds on a loaded machine)."""

MOUNT_POLL_S = 0.02
"""How often the mount point is checked while waiting for it."""

SERVER_EXIT_S = 10.0
"""How long the server may take to end once unmounted (its reads in flight finish first)
before it is terminated, then killed."""

FUSERMOUNT_TIMEOUT_S = 10.0
"""How long one ``fusermount3 -u`` may take."""

LOG_TAIL_CHARS = 400
"""How much of the server's output an error quotes."""

_HARMLESS_OUTPUT = ("Ignoring invalid max threads value",)
"""libfuse's start-up warnings that say nothing about a failure (left out of errors)."""

_PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The directory holding the pipecheck package: on the server's PYTHONPATH, so it runs the
same pipecheck from a source checkout too."""


class FuseUnavailable(PipecheckError):
    """A slow mount cannot be made here: no /dev/fuse, no fusermount3 or libfuse, no mfusepy,
    or the mount itself failed. The message says what and how to fix it."""


class SlowMountError(PipecheckError):
    """A slow mount could not be unmounted (the message gives the command that does it)."""


def fuse_problem() -> str | None:
    """Why a slow mount cannot be made on this machine (one line with the fix), or None
    when everything it needs is there. Cheap: starts no server."""
    if not sys.platform.startswith("linux"):
        return f"slow mounts need Linux FUSE and this is {sys.platform}; run on Linux"
    if not os.path.exists("/dev/fuse"):
        return ("no /dev/fuse (the kernel's FUSE device); load it (modprobe fuse) or, in a "
                "container, start it with --device /dev/fuse --cap-add SYS_ADMIN")
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user; run as root"
    if shutil.which(FUSERMOUNT) is None:
        return f"{FUSERMOUNT} is not installed (libfuse 3); {INSTALL_FIX}"
    if ctypes.util.find_library("fuse3") is None and ctypes.util.find_library("fuse") is None:
        return f"libfuse is not installed; {INSTALL_FIX}"
    if importlib.util.find_spec("mfusepy") is None:
        return "the FUSE binding mfusepy is not installed; pip install 'pipecheck[storage]'"
    return None


class Mount:
    """A slow mount while it is up: where it is, its server's pid, and what was served (the
    last counts stay readable after the mount has closed)."""

    def __init__(self, path: pathlib.Path, stats_file: pathlib.Path, server_pid: int) -> None:
        self.path = path
        """The mount point (absolute)."""
        self.server_pid = server_pid
        """The server process's pid."""
        self._stats_file = stats_file
        self._final: ReadStats | None = None

    def stats(self) -> ReadStats:
        """The reads served so far (a consistent snapshot of the server's stats file)."""
        if self._final is not None:
            return self._final
        return _read_stats(self._stats_file)

    @property
    def reads(self) -> int:
        """How many read requests the server has served so far."""
        return self.stats().reads

    def _close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._final = _read_stats(self._stats_file)
        if self._final is None:
            self._final = ReadStats()

    def __repr__(self) -> str:
        return f"Mount({str(self.path)!r}, server_pid={self.server_pid})"


def _read_stats(path: pathlib.Path, tries: int = 20) -> ReadStats:
    """The stats file's counters; read again while it is caught mid-write."""
    for _ in range(tries - 1):
        with contextlib.suppress(ValueError):
            return ReadStats.from_text(path.read_text())
        time.sleep(0.001)
    return ReadStats.from_text(path.read_text())


def _mount_points() -> list[pathlib.Path]:
    with open(mounts.MOUNTINFO) as f:
        return [pathlib.Path(m.point) for m in mounts.parse(f.read())]


def fuse_mounts_under(directory: str | os.PathLike[str]) -> list[pathlib.Path]:
    """Mount points at or under ``directory`` (from the mount table: a mount whose server
    died, which ``os.path.ismount`` reads as no mount, is listed too)."""
    root = pathlib.Path(os.path.realpath(directory))
    return [p for p in _mount_points() if p == root or root in p.parents]


def _is_mounted(path: pathlib.Path) -> bool:
    return path in _mount_points()


def _checked_dirs(source_dir: str | os.PathLike[str],
                  mountpoint: str | os.PathLike[str]) -> tuple[pathlib.Path, pathlib.Path]:
    """The source and the mount point as absolute real paths; ConfigError when either is
    not a directory, the mount point is a mount already, or it lies inside the source."""
    source = pathlib.Path(os.path.realpath(source_dir))
    target = pathlib.Path(os.path.realpath(mountpoint))
    if not source.is_dir():
        raise ConfigError(f"slow mount source {os.fspath(source_dir)!r} is not a directory; "
                          "give the directory to serve")
    if not target.is_dir():
        raise ConfigError(f"slow mount point {os.fspath(mountpoint)!r} is not a directory; "
                          f"create it first (mkdir -p {os.fspath(mountpoint)})")
    if _is_mounted(target):
        raise ConfigError(f"slow mount point {str(target)!r} is a mount point already; unmount "
                          f"it ({FUSERMOUNT} -u {target}) or use another directory")
    if target == source or source in target.parents:
        raise ConfigError(f"slow mount point {str(target)!r} is inside the directory it would "
                          "serve; put it outside the source directory")
    return source, target


def _output_tail(log: pathlib.Path) -> str:
    """The last of the server's output, libfuse's harmless warnings left out."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no output)"
    kept = [ln for ln in lines if ln.strip() and not ln.startswith(_HARMLESS_OUTPUT)]
    text = one_line(" | ".join(kept)) or "(no output)"
    return text[-LOG_TAIL_CHARS:]


def _start_server(args: ServerArgs, log: pathlib.Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT),
                                                    env.get("PYTHONPATH")) if p)
    with open(log, "wb") as out:
        return subprocess.Popen(server_command(args), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, close_fds=True)


def _wait_until_mounted(target: pathlib.Path, server: subprocess.Popen[bytes],
                        log: pathlib.Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not os.path.ismount(target):
        code = server.poll()
        if code is not None:
            raise FuseUnavailable(f"the slow mount server exited (code {code}) before {target} "
                                  f"was mounted: {_output_tail(log)}; if FUSE is missing: "
                                  f"{INSTALL_FIX}")
        if time.monotonic() > deadline:
            raise FuseUnavailable(f"{target} was not mounted within {timeout_s:g} s: "
                                  f"{_output_tail(log)}; if FUSE is missing: {INSTALL_FIX}")
        time.sleep(MOUNT_POLL_S)


def _fusermount(flags: str, target: pathlib.Path) -> None:
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([FUSERMOUNT, flags, str(target)], capture_output=True,
                       timeout=FUSERMOUNT_TIMEOUT_S, check=False)


def _end_server(server: subprocess.Popen[bytes], at_once: bool) -> None:
    """Wait for the server to end on its own (it does once unmounted), else terminate it,
    else kill it; always reaped. ``at_once``: terminate without waiting (a lazily unmounted
    server serves its open files until they close, which may be never)."""
    for stop in (None, server.terminate, server.kill):
        if stop is None and at_once:
            continue
        if stop is not None:
            with contextlib.suppress(OSError):
                stop()
        try:
            server.wait(timeout=SERVER_EXIT_S if stop is None else 2.0)
            return
        except subprocess.TimeoutExpired:
            continue
    server.wait()


def _unmount(target: pathlib.Path, server: subprocess.Popen[bytes] | None) -> bool:
    """Unmount (``-u``, then lazily with ``-uz`` if busy), end the server, and unmount
    lazily once more if a killed server left its mount behind. True when nothing is left."""
    lazy = False
    if _is_mounted(target):
        _fusermount("-u", target)
        if _is_mounted(target):
            _fusermount("-uz", target)
            lazy = True
    if server is not None:
        _end_server(server, at_once=lazy)
    if _is_mounted(target):
        _fusermount("-uz", target)
    return not _is_mounted(target)


@contextlib.contextmanager
def mounted(source_dir: str | os.PathLike[str], mountpoint: str | os.PathLike[str],
            storage: SlowStorage, *, timeout_s: float = MOUNT_TIMEOUT_S) -> Iterator[Mount]:
    """``source_dir`` served read-only at ``mountpoint`` (an existing directory) with reads
    as slow as ``storage`` says, until the block ends; unmounted whatever ends it.

    Raises ConfigError for a bad directory, FuseUnavailable when FUSE is missing or the
    mount fails, and SlowMountError when the mount cannot be removed (never in place of an
    exception already on its way out)."""
    if not isinstance(storage, SlowStorage):
        raise ConfigError(f"storage must be a SlowStorage, got {storage!r}")
    source, target = _checked_dirs(source_dir, mountpoint)
    problem = fuse_problem()
    if problem is not None:
        raise FuseUnavailable(problem)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="pipecheck-slow-mount-"))
    stats_file, log = workdir / "stats", workdir / "server.log"
    server: subprocess.Popen[bytes] | None = None
    mount: Mount | None = None
    clean = False
    try:
        server = _start_server(ServerArgs(str(source), str(target), storage, str(stats_file),
                                          os.getpid()), log)
        _wait_until_mounted(target, server, log, timeout_s)
        mount = Mount(target, stats_file, server.pid)
        yield mount
        clean = True
    finally:
        # the stats are read after the unmount: the last reads have been counted by then
        gone = _unmount(target, server)
        if mount is not None:
            mount._close()
        shutil.rmtree(workdir, ignore_errors=True)
        if not gone and clean:
            raise SlowMountError(f"{target} is still mounted; unmount it with "
                                 f"{FUSERMOUNT} -uz {target}")


if __name__ == "__main__":
    # The server's process only: slow_fs imports mfusepy, which loads libfuse.
    try:
        from pipecheck.testing import slow_fs
    except (ImportError, OSError) as err:
        sys.exit(f"slow_mount: cannot load the FUSE binding ({one_line(err)}); {INSTALL_FIX}")
    sys.exit(slow_fs.main(sys.argv[1:]))
