"""Following a running Monitor's record on disk (``Monitor(save_to=...)``), for
``pipecheck watch``: read it now, then every ``every_s`` seconds, again only when the file
changed (the Monitor replaces it atomically: a new inode, size or time). The sleep and the
wall clock are injected, so a test steps through polls without waiting."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Iterator

from pipecheck.errors import ResultFormatError
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult

WATCH_HINT = "pipecheck watch reads the file a Monitor keeps with Monitor(save_to=...)"


@dataclasses.dataclass(frozen=True)
class Poll:
    """One look at the file."""

    record: MonitorResult
    changed: bool
    """The file was written since the last poll (the first poll: True)."""
    age_s: float
    """Seconds since the file was last written."""


def read_run(path: str) -> MonitorResult:
    """The Monitor record in ``path``, or a one-line error saying what the file is instead."""
    if not os.path.exists(path):
        raise ResultFormatError(f"{path} does not exist; {WATCH_HINT} (written from the "
                                "run's first step on): check the path, or start the run first")
    try:
        return store.load(path, expect=MonitorResult)
    except ResultFormatError as e:
        raise ResultFormatError(f"{e}; {WATCH_HINT}") from None


def follow(path: str, every_s: float, sleep: Callable[[float], None] = time.sleep,
           now: Callable[[], float] = time.time) -> Iterator[Poll]:
    """Poll ``path`` now and after each ``sleep(every_s)``, forever (the caller stops)."""
    key: tuple[int, int, int] | None = None
    record: MonitorResult | None = None
    while True:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if record is None:
                read_run(path)  # says the file does not exist
            raise ResultFormatError(f"{path} was removed while watched; {WATCH_HINT}") from None
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        changed = seen != key or record is None
        if changed:
            record, key = read_run(path), seen
        assert record is not None
        yield Poll(record, changed, max(0.0, now() - st.st_mtime))
        sleep(every_s)
