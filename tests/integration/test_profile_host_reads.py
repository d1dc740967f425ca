"""``profile`` finds every kind of host read by what it does in a real jax.profiler capture:
the committed captures of each JAX version (tests/data/host_reads/) and a fresh one made
with the installed JAX."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from pipecheck.analysis import profile as ap
from pipecheck.logs import capture
from pipecheck.profiling import ProfileOptions, profile_capture

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
LOOP = DATA / "host_read_loop.py"
READS = ("item", "float", "int", "asarray", "device_get", "tolist", "block", "print")
COMMITTED = sorted((DATA / "host_reads").glob("jax-*/*.trace.json.gz"))

MATERIAL_SYNC_SHARE = 0.5
"""Each loop's step is a jitted call then the read: the thread waits for the device in the
read most of the step (all of it but the dispatch)."""


def read_line(read: str) -> int:
    """The line of host_read_loop.py marked ``# HOST-READ read``."""
    lines = LOOP.read_text().splitlines()
    (n,) = [i + 1 for i, s in enumerate(lines) if re.search(rf"# HOST-READ {read}$", s)]
    return n


def found(path: pathlib.Path) -> list[tuple[str, int]]:
    """(location, samples) of each user-side sync site in the capture's steady steps."""
    t = capture.read_timeline(path)
    steps = ap.find_steps(t)
    steady = np.ones(len(steps.starts), dtype=bool)
    return [(capture.locate(c, [str(DATA)])[0], c.count)
            for c in ap.sync_calls(t, steps, steady) if not c.internal]


def missed_steps_waited_for_nothing(path: pathlib.Path, read: str) -> int:
    """The steps whose read is not found as a sync: each must have begun its read after the
    device had finished (a busy host reaches it late; the read then waits for nothing and
    is, by behaviour, no sync in that step). Their count."""
    t = capture.read_timeline(path)
    steps = ap.find_steps(t)
    _, done = ap.merge(t.busy)
    frame = f"read_{read}"
    missed = 0
    for k in range(len(steps.starts)):
        one = np.zeros(len(steps.starts), dtype=bool)
        one[k] = True
        if [c for c in ap.sync_calls(t, steps, one) if not c.internal]:
            continue
        end = steps.starts[k + 1] if k + 1 < len(steps.starts) else np.inf
        (i,) = [i for i in range(len(t.starts)) if steps.starts[k] <= t.starts[i] < end
                and t.name_table[t.names[i]].endswith(frame)]
        finished = done[(done > steps.starts[k]) & (done <= t.ends[i])]
        assert finished.size and finished.max() <= t.starts[i], (
            f"step {k}: its read waited for the device and was not found")
        missed += 1
    return missed


def check(path: pathlib.Path, read: str) -> None:
    sites = found(path)
    result = profile_capture(ProfileOptions(str(path), source_dirs=(str(DATA),)))
    if read == "none":
        assert sites == []
        assert result.estimates.sync_share == 0.0
        return
    assert [loc for loc, _ in sites] == [f"{LOOP}:{read_line(read)}"], sites
    steps = len(ap.find_steps(capture.read_timeline(path)).starts)
    missed = missed_steps_waited_for_nothing(path, read)
    assert sites[0][1] == steps - missed and missed < steps / 2
    assert result.estimates.sync_share > MATERIAL_SYNC_SHARE


def test_every_committed_jax_version_has_a_capture_of_every_read():
    versions = {p.parent.name for p in COMMITTED}
    assert len(versions) >= 1
    for v in versions:
        assert {p.name.split(".")[0] for p in COMMITTED if p.parent.name == v} == {
            *READS, "none"}


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}-{p.name}")
def test_committed_capture(path):
    check(path, path.name.split(".")[0])


@pytest.mark.parametrize("read", ["item", "print", "none"])
def test_fresh_capture_with_the_installed_jax(read, tmp_path):
    import sys
    sys.path.insert(0, str(DATA))
    try:
        import make_host_read_captures as maker
    finally:
        sys.path.remove(str(DATA))
    check(maker.capture(read, tmp_path / f"{read}.trace.json.gz"), read)
