"""The page cache and the data files: which files a pipeline's sources read (real Grain
sources over a real ArrayRecord file), the file system a path is on (a hand-written mount
table), what --cold refuses, and a local file's residency read with mincore: warm after
reading it, cold after evicting it."""

from __future__ import annotations

import os
import pathlib
import random
import tempfile

import pytest

from pipecheck.data.grain_pipeline import BatchedExamples, MainProcessMap
from pipecheck.data.sources import IndexedSource
from pipecheck.errors import ConfigError
from pipecheck.measure import page_cache as pc
from tests.storage_fixtures import disk_dir  # noqa: F401

MOUNTINFO = "\n".join([
    "22 27 0:21 / /proc rw,relatime - proc proc rw",
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw",
    "31 27 0:25 / /tmp rw,nosuid - tmpfs tmpfs rw",
    "45 27 0:40 / /data/bucket ro,nosuid,nodev - fuse.gcsfuse my-bucket ro,user_id=0",
    "46 27 0:41 / /mnt/nfs rw - nfs4 server:/export rw,vers=4.2",
    "47 27 0:42 / /mnt/with\\040space rw - xfs /dev/vdb rw",
    "48 45 0:43 / /data/bucket/local rw - ext4 /dev/vdc rw",
])


@pytest.mark.parametrize("path, fstype", [
    ("/work/data/train.array_record", "ext4"),
    ("/tmp/x.array_record", "tmpfs"),
    ("/data/bucket/shard-0.array_record", "fuse.gcsfuse"),
    ("/data/bucket/local/shard-0.array_record", "ext4"),  # the deepest mount wins
    ("/mnt/nfs/a", "nfs4"),
    ("/mnt/with space/a", "xfs"),
    ("/tmpfoo/a", "ext4"),  # a prefix of a mount point's name is not inside it
])
def test_the_file_system_of_a_path_is_its_deepest_mount(path, fstype):
    assert pc.filesystem_of(path, MOUNTINFO) == fstype


@pytest.mark.parametrize("fstype, can", [
    ("fuse", False), ("fuse.gcsfuse", False), ("fuseblk", False), ("nfs4", False),
    ("cifs", False), ("tmpfs", False), ("virtiofs", False), ("ext4", True), ("xfs", True),
    ("overlay", True), ("btrfs", True),
])
def test_eviction_is_refused_where_the_kernel_page_cache_does_not_serve_reads(fstype, can):
    assert (pc.cannot_evict(fstype) is None) == can


def test_cold_is_refused_in_one_line_naming_the_file_and_the_fix():
    files = pc.DataFiles(("/work/a.array_record", "/data/bucket/b.array_record"), 10)
    problem = pc.cold_problem(files, MOUNTINFO)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("--cold cannot evict /data/bucket/b.array_record from the page "
                              "cache: it is on fuse.gcsfuse, a FUSE file system")
    assert problem.endswith("drop --cold, or copy the data to a local disk to measure it cold")
    assert pc.cold_problem(pc.DataFiles(("/work/a.array_record",), 10), MOUNTINFO) is None
    unknown = pc.cold_problem(pc.NO_FILES, MOUNTINFO)
    assert unknown is not None and unknown.startswith(
        "--cold cannot tell which files this pipeline reads")


def test_residency_does_not_open_a_file_on_fuse():
    """The kernel drops a FUSE file's cached pages when it is opened: residency says unknown
    instead (the path need not exist: it is never opened)."""
    assert pc.residency(("/data/bucket/missing.array_record",), MOUNTINFO) is None


@pytest.fixture
def array_record(disk_dir: pathlib.Path) -> pathlib.Path:  # noqa: F811
    """A 1 MB ArrayRecord file of 256 records of 4 kB, on a disk."""
    from array_record.python.array_record_module import ArrayRecordWriter

    path = disk_dir / "data.array_record"
    writer = ArrayRecordWriter(str(path), "group_size:1,uncompressed")
    rng = random.Random(0)
    for _ in range(256):
        writer.write(rng.randbytes(4096))
    writer.close()
    return path


def test_the_files_are_found_through_the_sources_that_wrap_them(array_record):
    import grain

    source = grain.sources.ArrayRecordDataSource(str(array_record))
    examples = grain.MapDataset.source(IndexedSource(source, "x")).shuffle(seed=1).map(len)
    expected = pc.DataFiles((str(array_record.resolve()),), 256)
    for pipeline in (examples, BatchedExamples(examples, 8), examples.batch(8),
                     MainProcessMap(BatchedExamples(examples, 8), lambda b: b),
                     examples.to_iter_dataset().batch(4)):
        assert pc.data_files(pipeline) == expected, pipeline
    assert expected.data_bytes == os.path.getsize(array_record)
    assert pc.data_files(grain.MapDataset.source(list(range(10)))) == pc.NO_FILES
    assert pc.data_files(None) == pc.NO_FILES


def test_a_local_file_reads_warm_after_reading_it_and_cold_after_eviction(array_record):
    files = pc.DataFiles((str(array_record),), 256)
    array_record.read_bytes()
    assert pc.residency(files.paths) == 1.0
    left = pc.evict(files)
    assert left is not None and left <= pc.COLD_RESIDENCY_MAX
    assert pc.residency(files.paths) == left
    with open(array_record, "rb") as f:  # one page read again, and what the kernel reads
        os.pread(f.fileno(), 4096, 0)    # ahead of it (128 kB at most at a file's start)
    part = pc.residency(files.paths)
    assert part is not None and 0 < part < 0.5


def test_a_watch_reads_the_cache_around_a_setting_and_evicts_for_cold(array_record):
    files = pc.DataFiles((str(array_record),), 256)
    array_record.read_bytes()
    warm = pc.CacheWatch(files)
    warm.start()
    seen = warm.seen()
    assert seen is not None and seen.records == 256 and seen.available_bytes > 0
    assert seen.page_cache.resident_before == 1.0 and not seen.page_cache.evicted
    assert seen.page_cache.data_bytes == os.path.getsize(array_record)
    cold = pc.CacheWatch(files, cold=True)
    cold.start()
    array_record.read_bytes()  # the setting reads it all
    seen = cold.seen()
    assert seen is not None and seen.page_cache.evicted
    assert seen.page_cache.resident_before is not None
    assert seen.page_cache.resident_before <= pc.COLD_RESIDENCY_MAX
    assert seen.page_cache.resident_after == 1.0
    assert pc.NO_CACHE_WATCH.seen() is None


def test_a_file_on_tmpfs_is_refused_for_cold(tmp_path):
    shm = pathlib.Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm on this machine")
    with tempfile.NamedTemporaryFile(dir=shm) as f:
        with pytest.raises(ConfigError, match=r"it is on tmpfs, a file system in memory"):
            pc.evict(pc.DataFiles((f.name,), 1))
