"""The slow mount's pure parts (pipecheck/testing/slow_storage.py) and its refusals before
any server starts: SlowStorage's checks, the slow tail's schedule, the read delay, the stats
file's format, the server's command line, and FuseUnavailable's message."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from pipecheck.errors import ConfigError
from pipecheck.testing import slow_mount
from pipecheck.testing.slow_mount import FuseUnavailable, fuse_problem, mounted
from pipecheck.testing.slow_storage import (
    SERVER_MODULE,
    ReadStats,
    ServerArgs,
    SlowStorage,
    parse_server_args,
    server_command,
)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"latency_s": -0.5}, "latency_s must be a number of seconds >= 0, got -0.5"),
    ({"latency_s": float("nan")}, "latency_s must be a number of seconds >= 0, got nan"),
    ({"latency_s": "1"}, "latency_s must be a number of seconds >= 0, got '1'"),
    ({"latency_s": 0, "bandwidth_bps": 0},
     "bandwidth_bps must be bytes per second > 0 (or None: no cap), got 0"),
    ({"latency_s": 0, "tail_every": -1},
     "tail_every must be a whole number >= 0 (0: no slow tail), got -1"),
    ({"latency_s": 0, "tail_every": 2.5},
     "tail_every must be a whole number >= 0 (0: no slow tail), got 2.5"),
    ({"latency_s": 0, "tail_factor": 0.5},
     "tail_factor must be a number >= 1 (how many times as long a slow read takes), got 0.5"),
    ({"latency_s": 0, "direct_io": 1}, "direct_io must be True or False, got 1"),
    ({"latency_s": 0, "tail_seed": None}, "tail_seed must be a whole number, got None"),
])
def test_slow_storage_refuses_a_bad_value_in_one_line_naming_it(kwargs, message):
    with pytest.raises(ConfigError) as raised:
        SlowStorage(**kwargs)
    assert str(raised.value) == message


def test_exactly_one_read_in_each_block_is_the_slow_tail_and_the_seed_fixes_which():
    storage = SlowStorage(0.01, tail_every=5, tail_factor=3.0, tail_seed=1)
    tails = [i for i in range(500) if storage.is_tail(i)]
    assert [i // 5 for i in tails] == list(range(100))  # one per block of 5
    assert len({i % 5 for i in tails}) > 1  # not always the same position: not periodic
    assert tails == [i for i in range(500)
                     if SlowStorage(0.01, tail_every=5, tail_factor=3.0, tail_seed=1).is_tail(i)]
    assert tails != [i for i in range(500)
                     if SlowStorage(0.01, tail_every=5, tail_factor=3.0, tail_seed=2).is_tail(i)]
    assert not any(SlowStorage(0.01).is_tail(i) for i in range(100))
    assert all(SlowStorage(0.01, tail_every=1).is_tail(i) for i in range(10))


def test_a_read_waits_the_latency_plus_size_over_bandwidth_times_the_tail_factor():
    storage = SlowStorage(0.02, bandwidth_bps=1000.0, tail_every=4, tail_factor=3.0)
    assert storage.read_delay_s(500, tail=False) == pytest.approx(0.52)
    assert storage.read_delay_s(500, tail=True) == pytest.approx(1.56)
    assert SlowStorage(0.02).read_delay_s(10**9, tail=False) == 0.02


def test_the_stats_file_keeps_one_size_and_reads_back():
    stats = ReadStats(reads=12, tail_reads=3, bytes_read=49152)
    text = stats.to_text()
    assert text.splitlines()[0].split() == ["reads", "12"]
    assert len(text) == len(ReadStats().to_text()) == len(ReadStats(10**18, 1, 2).to_text())
    assert ReadStats.from_text(text) == stats
    for torn in ("", text[:20], text.replace("reads", "rides", 1)):
        with pytest.raises(ValueError, match="not a slow mount stats file"):
            ReadStats.from_text(torn)


def test_the_server_command_line_reads_back_as_what_it_was_built_from():
    for storage in (SlowStorage(0.25), SlowStorage(0.004, bandwidth_bps=5e6, tail_every=8,
                                                   tail_factor=4.0, direct_io=False,
                                                   tail_seed=3)):
        args = ServerArgs("/src", "/mnt", storage, "/tmp/stats", 1234)
        argv = server_command(args)
        assert argv[:5] == [sys.executable, "-m", SERVER_MODULE, "/src", "/mnt"]
        back = parse_server_args(argv[3:])
        assert back.storage.latency_s == pytest.approx(storage.latency_s)  # through ms
        exact = dataclasses.replace(back.storage, latency_s=storage.latency_s)
        assert dataclasses.replace(back, storage=exact) == args
    with pytest.raises(ConfigError, match="got -0.005"):
        parse_server_args(["/src", "/mnt", "--latency-ms", "-5"])


def test_without_fusermount3_a_mount_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(slow_mount.shutil, "which", lambda name: None)
    (tmp_path / "src").mkdir()
    (tmp_path / "mnt").mkdir()
    problem = fuse_problem()
    assert problem is not None and "\n" not in problem
    if os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK):
        assert problem == ("fusermount3 is not installed (libfuse 3); "
                           "apt-get install -y fuse3 && pip install mfusepy")
    with pytest.raises(FuseUnavailable) as raised, \
            mounted(tmp_path / "src", tmp_path / "mnt", SlowStorage(0.01)):
        pass
    assert str(raised.value) == problem


def test_importing_pipecheck_and_the_slow_mount_does_not_import_the_fuse_binding():
    code = ("import sys, pipecheck, pipecheck.testing.slow_mount\n"
            "print('mfusepy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
