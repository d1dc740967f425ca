"""The dataloader report's reading table and storage finding render what the record holds
(hand-built settings: the slow mount's, and a local file's read cold)."""

from __future__ import annotations

import dataclasses

from pipecheck.analysis.loader.storage import storage_finding
from pipecheck.records.dataloader import DataloaderResult, PageCache
from pipecheck.report.dataloader import format_dataloader, storage_parts
from tests.unit.analysis.test_storage import SLOW_MOUNT_1_THREAD, setting

LOCAL_COLD = dataclasses.replace(
    setting(batch_s=0.050, read_s=3e-5, wait=0.02, cpu_s=0.049),
    page_cache=PageCache(files=2, data_bytes=10**6, resident_before=0.01, resident_after=0.8,
                         evicted=True, warnings=("D changes level at timed batch 20",)))
SLOW = dataclasses.replace(SLOW_MOUNT_1_THREAD, page_cache=PageCache(
    files=2, data_bytes=10**6, resident_before=None, resident_after=None))


def result(*settings, cold=False):
    finding = storage_finding(settings)
    return DataloaderResult(env={"cpu_count": 2}, config={"workload": "demo"},
                            results=settings, batches=40, cold=cold,
                            storage_findings=(finding,) if finding else ())


def test_the_reading_table_and_the_finding():
    text = format_dataloader(result(SLOW, LOCAL_COLD, cold=True))
    lines = text.splitlines()
    assert "(workload demo; 40 batches timed after the first, with device_put, the data " \
           "files evicted from the page cache before each (--cold))" in lines[0]
    head = next(i for i, ln in enumerate(lines) if ln.split() == [
        "workers", "threads", "per", "read", "reads/batch", "read", "wait", "CPU", "share",
        "storage-bound", "page", "cache", "evicted"])
    assert lines[head + 2].split() == ["0", "1", "20.5", "ms", "8.0", "98%", "3%", "yes",
                                       "unknown", "->", "unknown", "no"]
    assert lines[head + 3].split() == ["0", "1", "0.03", "ms", "8.0", "2%", "98%", "no",
                                       "1%", "->", "80%", "yes"]
    assert "Storage (loading that waits on reads, not on CPU work):" in lines
    assert any(ln.startswith("- storage-bound [workers=0, threads=1]: loading waits on "
                             "storage") for ln in lines)
    assert "warning: workers=0 threads=1: D changes level at timed batch 20" in text


def test_nothing_about_reading_without_a_reading_stage_or_a_page_cache():
    bare = dataclasses.replace(LOCAL_COLD, reads=None, page_cache=None)
    assert storage_parts(result(bare)) == []
    assert "Reading, per setting" not in format_dataloader(result(bare))
