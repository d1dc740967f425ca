"""Storage named as the cause, on a real slow mount: the demo workload reads an ArrayRecord
file of text (2,000 documents of 2 kB, one record per group) through a FUSE mount that
answers every read after 20 ms, like a network file system or gcsfuse without its cache;
``pipecheck dataloader`` times it at 1 and 16 read threads, then ``--cold`` is asked for
on the same mount.

    python examples/storage_slow_mount.py [LATENCY_MS]

Needs FUSE: ``apt-get install -y fuse3 && pip install mfusepy``, as root (or a user allowed
to mount). The data and the mount live in a temporary directory; the mount is always
unmounted (pipecheck.testing.slow_mount). See docs/storage.md.
"""

from __future__ import annotations

import pathlib
import random
import subprocess
import sys
import tempfile

from pipecheck.testing.slow_mount import SlowStorage, mounted

WORDS = ("alpha", "beta", "gamma", "delta", "storage", "latency", "read", "batch")


def write_text_records(path: pathlib.Path, records: int = 2000) -> None:
    """``records`` documents of about 2 kB of text, one per ArrayRecord group."""
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(str(path), "group_size:1")
    rng = random.Random(0)
    for _ in range(records):
        writer.write(" ".join(rng.choice(WORDS) for _ in range(300))[:2048].encode())
    writer.close()


def pipecheck(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipecheck", *args], cwd=cwd,
                          capture_output=True, text=True)


def main() -> int:
    latency_s = (float(sys.argv[1]) if len(sys.argv) > 1 else 20.0) / 1000
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "data").mkdir()
        (root / "mnt").mkdir()
        write_text_records(root / "data" / "text.array_record")
        source = "source=mnt/text.array_record"
        with mounted(root / "data", root / "mnt", SlowStorage(latency_s)):
            timed = pipecheck("dataloader", "--set", source, "--threads", "1,16",
                              "--batches", "20", cwd=root)
            cold = pipecheck("dataloader", "--set", source, "--cold", "--quiet", cwd=root)
    print(timed.stdout, end="")
    print(f"\n$ pipecheck dataloader --set {source} --cold")
    print(cold.stderr.strip())
    print(f"(exit {cold.returncode})")
    return timed.returncode if timed.returncode else int(cold.returncode != 2)


if __name__ == "__main__":
    sys.exit(main())
