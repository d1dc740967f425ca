"""The slow mount (pipecheck/testing/slow_mount.py) on a real FUSE mount: the bytes served
are the source's, reads are delayed as SlowStorage says (checked as relations and lower
bounds, never absolute times), the mount is always gone afterwards (exception, Ctrl-C,
signal, the process that made it killed), and Grain reads through it faster with more
threads."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from pipecheck.errors import ConfigError
from pipecheck.testing.slow_mount import SlowStorage, fuse_mounts_under, mounted
from pipecheck.testing.slow_storage import SERVER_MODULE
from pipecheck.testing.storage_pipeline import write_array_record
from tests.storage_fixtures import require_fuse, slow_mount  # noqa: F401

REPO = pathlib.Path(__file__).resolve().parents[2]
BLOCK = 4096
GONE_TIMEOUT_S = 15.0
"""How long a mount may take to disappear after its process was killed (the server's
parent watch polls every 0.2 s; the rest is a loaded machine's slack)."""


@pytest.fixture
def source(tmp_path: pathlib.Path) -> pathlib.Path:
    """A directory with one 256 KiB file of seeded random bytes."""
    directory = tmp_path / "source"
    directory.mkdir()
    (directory / "data.bin").write_bytes(random.Random(0).randbytes(256 * 1024))
    return directory


def _serial_reads(path: pathlib.Path, n: int, size: int = BLOCK) -> list[float]:
    """Seconds each of ``n`` reads of ``size`` bytes took, one after the other."""
    times = []
    with open(path, "rb", buffering=0) as f:
        for i in range(n):
            start = time.perf_counter()
            assert len(os.pread(f.fileno(), size, i * size)) == size
            times.append(time.perf_counter() - start)
    return times


def _threaded_reads(path: pathlib.Path, n: int) -> float:
    """Seconds ``n`` reads of one block take from ``n`` threads at once (one file)."""
    with open(path, "rb", buffering=0) as f:
        threads = [threading.Thread(target=os.pread, args=(f.fileno(), BLOCK, i * BLOCK))
                   for i in range(n)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - start


def _server_pids(marker: pathlib.Path) -> list[int]:
    """Live slow mount servers whose command line names ``marker`` (from /proc)."""
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if SERVER_MODULE.encode() in argv and any(str(marker).encode() in a for a in argv):
            pids.append(int(entry.name))
    return pids


def _wait_until_gone(mountpoint: pathlib.Path) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while fuse_mounts_under(mountpoint) or _server_pids(mountpoint):
        assert time.monotonic() < deadline, (
            f"still mounted: {fuse_mounts_under(mountpoint)}, servers: "
            f"{_server_pids(mountpoint)}")
        time.sleep(0.05)


def test_the_mount_serves_the_source_read_only(source, slow_mount):  # noqa: F811
    mount = slow_mount(source, latency_s=0.001)
    assert sorted(os.listdir(mount.path)) == ["data.bin"]
    assert (mount.path / "data.bin").stat().st_size == 256 * 1024
    assert (mount.path / "data.bin").read_bytes() == (source / "data.bin").read_bytes()
    assert mount.reads >= 2  # 256 KiB in 128 KiB requests at most
    assert mount.stats().bytes_read == 256 * 1024
    with pytest.raises(OSError):
        (mount.path / "data.bin").write_bytes(b"x")
    with pytest.raises(OSError):
        (mount.path / "new.bin").write_bytes(b"x")
    with pytest.raises(FileNotFoundError):
        (mount.path / "missing.bin").read_bytes()


def test_without_direct_io_the_page_cache_serves_repeated_reads(source, slow_mount):  # noqa: F811
    mount = slow_mount(source, latency_s=0.001, direct_io=False)
    with open(mount.path / "data.bin", "rb", buffering=0) as f:
        first = os.pread(f.fileno(), BLOCK, 0)
        served = mount.reads
        assert served >= 1
        assert os.pread(f.fileno(), BLOCK, 0) == first
        assert mount.reads == served  # the second read came from the kernel's cache


@pytest.mark.timing
def test_each_read_waits_the_latency_and_concurrent_reads_wait_side_by_side(source,
                                                                            slow_mount):  # noqa: F811
    latency = 0.1
    mount = slow_mount(source, latency_s=latency)
    serial = sum(_serial_reads(mount.path / "data.bin", 8))
    threaded = _threaded_reads(mount.path / "data.bin", 8)
    assert serial >= 8 * latency
    assert threaded >= latency
    assert threaded < 0.6 * serial, (threaded, serial)
    assert mount.reads == 16


@pytest.mark.timing
def test_the_bandwidth_cap_adds_size_over_bandwidth_to_each_read(source, slow_mount):  # noqa: F811
    latency, bandwidth, size = 0.005, 1024 * 1024, 64 * 1024
    capped = slow_mount(source, latency_s=latency, bandwidth_bps=bandwidth)
    uncapped = slow_mount(source, latency_s=latency)
    capped_s = sum(_serial_reads(capped.path / "data.bin", 4, size))
    uncapped_s = sum(_serial_reads(uncapped.path / "data.bin", 4, size))
    assert capped_s >= 4 * (latency + size / bandwidth)  # 0.27 s, against 0.02 s of latency
    assert uncapped_s < capped_s, (uncapped_s, capped_s)
    assert capped.stats().bytes_read == 4 * size


@pytest.mark.timing
def test_one_read_in_each_block_of_the_tail_is_slow_and_always_the_same(source, slow_mount):  # noqa: F811
    latency, every, factor = 0.02, 4, 10.0
    storage = SlowStorage(latency, tail_every=every, tail_factor=factor, tail_seed=7)
    mount = slow_mount(source, latency_s=latency, tail_every=every, tail_factor=factor,
                       tail_seed=7)
    times = _serial_reads(mount.path / "data.bin", 8)
    tails = [i for i in range(8) if storage.is_tail(i)]
    assert len(tails) == 2 and mount.stats().tail_reads == 2
    assert all(times[i] >= factor * latency for i in tails), times
    assert sum(times) >= (8 - 2 + 2 * factor) * latency  # 0.52 s, against 0.16 s without
    assert mount.reads == 8


def _mountpoint(tmp_path: pathlib.Path, name: str = "mnt") -> pathlib.Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_the_mount_is_gone_after_the_block_an_exception_or_ctrl_c_in_it(source, tmp_path):
    require_fuse()
    mountpoint = _mountpoint(tmp_path)
    with mounted(source, mountpoint, SlowStorage(0.001)) as mount:
        assert os.path.ismount(mountpoint) and _server_pids(mountpoint) == [mount.server_pid]
    assert fuse_mounts_under(tmp_path) == [] and _server_pids(mountpoint) == []
    assert mount.reads == 0  # the last counts stay readable
    for error in (RuntimeError("the test's own error"), KeyboardInterrupt()):
        with pytest.raises(type(error)) as raised, \
                mounted(source, mountpoint, SlowStorage(0.001)):
            raise error
        assert raised.value is error
        assert fuse_mounts_under(tmp_path) == [] and _server_pids(mountpoint) == []


def test_a_busy_mount_is_unmounted_lazily_and_its_server_ended(source, tmp_path):
    require_fuse()
    mountpoint = _mountpoint(tmp_path)
    with mounted(source, mountpoint, SlowStorage(0.001)):
        busy = open(mountpoint / "data.bin", "rb")  # held open past the block
    try:
        assert fuse_mounts_under(tmp_path) == [] and _server_pids(mountpoint) == []
    finally:
        busy.close()


def test_a_signalled_server_unmounts_itself(source, tmp_path):
    require_fuse()
    for sig in (signal.SIGTERM, signal.SIGINT):
        mountpoint = _mountpoint(tmp_path, f"mnt-{sig.name}")
        with mounted(source, mountpoint, SlowStorage(0.001)) as mount:
            os.kill(mount.server_pid, sig)
            _wait_until_gone(mountpoint)
        assert fuse_mounts_under(tmp_path) == []


_HOLDER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from pipecheck.testing.slow_mount import SlowStorage, mounted
with mounted(sys.argv[1], sys.argv[2], SlowStorage(0.001)) as mount:
    print(mount.server_pid, flush=True)
    time.sleep(120)
"""
"""A process that makes a slow mount and holds it (Ctrl-C raises KeyboardInterrupt in it
even when the tests run in a background shell, which hands SIGINT down ignored)."""


def _holder(source: pathlib.Path, mountpoint: pathlib.Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(source), str(mountpoint)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), proc.communicate(timeout=30)
    assert os.path.ismount(mountpoint)
    return proc


def test_the_mount_is_gone_when_the_process_that_made_it_is_killed(source, tmp_path):
    require_fuse()
    mountpoint = _mountpoint(tmp_path)
    holder = _holder(source, mountpoint)
    holder.kill()
    holder.communicate(timeout=30)
    _wait_until_gone(mountpoint)


def test_ctrl_c_in_the_process_that_made_it_unmounts(source, tmp_path):
    require_fuse()
    mountpoint = _mountpoint(tmp_path)
    holder = _holder(source, mountpoint)
    holder.send_signal(signal.SIGINT)
    _, err = holder.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    assert fuse_mounts_under(tmp_path) == [] and _server_pids(mountpoint) == []


def _seconds_for_batches(source: object, threads: int, batches: int) -> float:
    import grain

    ds = grain.MapDataset.source(source).to_iter_dataset(
        grain.ReadOptions(num_threads=threads, prefetch_buffer_size=2 * threads)).batch(8)
    start = time.perf_counter()
    it = iter(ds)
    for _ in range(batches):
        next(it)
    return time.perf_counter() - start


@pytest.mark.timing
def test_grain_reads_an_array_record_file_faster_with_more_threads(tmp_path, slow_mount):  # noqa: F811
    import grain

    data = tmp_path / "records"
    data.mkdir()
    write_array_record(data / "data.array_record", 300, record_bytes=512)
    mount = slow_mount(data, latency_s=0.01)
    src = grain.sources.ArrayRecordDataSource(str(mount.path / "data.array_record"))
    assert len(src) == 300
    one = _seconds_for_batches(src, threads=1, batches=12)
    served = mount.reads
    eight = _seconds_for_batches(src, threads=8, batches=12)
    assert served >= 96  # a read (at least) per record: 12 batches of 8
    assert one >= 96 * 0.01
    assert eight < 0.5 * one, (eight, one)


def test_bad_input_is_one_line_and_leaves_nothing_mounted(source, tmp_path):
    require_fuse()
    missing = tmp_path / "no-such-dir"
    cases = [
        (lambda: mounted(source, missing, SlowStorage(0.01)),
         "is not a directory; create it first"),
        (lambda: mounted(tmp_path / "no-source", _mountpoint(tmp_path), SlowStorage(0.01)),
         "is not a directory; give the directory to serve"),
        (lambda: mounted(source, _mountpoint(source, "inside"), SlowStorage(0.01)),
         "is inside the directory it would serve"),
        (lambda: mounted(source, _mountpoint(tmp_path, "m2"), SlowStorage(-0.01)),
         "latency_s must be a number of seconds >= 0, got -0.01"),
    ]
    for make, message in cases:
        with pytest.raises(ConfigError) as raised, make():
            pass
        assert message in str(raised.value) and "\n" not in str(raised.value)
    assert not missing.exists()
    assert fuse_mounts_under(tmp_path) == [] and _server_pids(tmp_path) == []
