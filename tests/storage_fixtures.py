"""Slow storage for tests: the ``slow_mount`` fixture (a factory of slow FUSE mounts, all
unmounted at teardown) and ``require_fuse()``.

``disk_dir`` is a directory on a disk (files there can be evicted from the page cache).

Where FUSE is missing, a test that needs it fails with the reason when the environment
variable ``CI`` is set (CI installs fuse3 and mfusepy: a skip there would hide a broken
set-up) and is skipped elsewhere. Use it with::

    from tests.storage_fixtures import slow_mount  # noqa: F401
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest

from pipecheck.measure.page_cache import cannot_evict, filesystem_of
from pipecheck.testing.slow_mount import (
    FUSERMOUNT,
    FuseUnavailable,
    Mount,
    SlowStorage,
    fuse_mounts_under,
    fuse_problem,
    mounted,
)

REPO = pathlib.Path(__file__).resolve().parents[1]

SlowMountFactory = Callable[..., Mount]
"""``slow_mount(source_dir, latency_s=..., bandwidth_bps=..., tail_every=..., ...)``: the
keywords are SlowStorage's."""


def fuse_missing(reason: str) -> NoReturn:
    """Fail with ``reason`` under CI, skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"FUSE is needed here and unavailable: {reason}", pytrace=False)
    pytest.skip(f"FUSE unavailable: {reason}")


def require_fuse() -> None:
    """Stop the test (fail under CI, else skip) when a slow mount cannot be made here."""
    problem = fuse_problem()
    if problem is not None:
        fuse_missing(problem)


@pytest.fixture
def slow_mount(tmp_path: pathlib.Path) -> Iterator[SlowMountFactory]:
    """A factory of slow mounts of a directory, each on a fresh mount point under the test's
    ``tmp_path``; all are unmounted at teardown, and a mount left behind fails the test."""
    require_fuse()
    base = tmp_path / "slow_mounts"
    numbers = itertools.count()
    with contextlib.ExitStack() as stack:

        def make(source_dir: str | os.PathLike[str], latency_s: float = 0.0,
                 **storage: Any) -> Mount:
            mountpoint = base / f"m{next(numbers)}"
            mountpoint.mkdir(parents=True)
            try:
                return stack.enter_context(
                    mounted(source_dir, mountpoint, SlowStorage(latency_s, **storage)))
            except FuseUnavailable as err:
                fuse_missing(str(err))

        yield make
    left = fuse_mounts_under(base) if base.exists() else []
    for path in left:
        subprocess.run([FUSERMOUNT, "-uz", str(path)], capture_output=True, check=False)
    assert left == [], f"slow mounts left mounted after the test: {left}"


@pytest.fixture
def disk_dir(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A directory on a disk, where files can be evicted from the page cache: ``tmp_path``,
    or (where that is in memory: a tmpfs /tmp) a temporary directory in the checkout."""
    with open("/proc/self/mountinfo") as f:
        table = f.read()
    if cannot_evict(filesystem_of(str(tmp_path.resolve()), table)) is None:
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=REPO) as d:
        yield pathlib.Path(d)
