"""Storage named as the cause, on a real slow mount: the demo workload reads an ArrayRecord
file of text (2,000 documents of 2 kB, one record per group) through a FUSE mount that
answers every read after 20 ms, like a network file system or gcsfuse without its cache;
``pipecheck dataloader`` times it at 1 and 16 read threads, without and with a worker,
then ``--cold`` is asked for on the same mount; ``pipecheck whatif --read-latency 30ms``
predicts D at 16 threads were every read 30 ms slower, and a mount that much slower
measures it.

    python examples/storage_slow_mount.py [LATENCY_MS]

Needs FUSE: ``apt-get install -y fuse3 && pip install mfusepy``, as root (or a user allowed
to mount). The data and the mount live in a temporary directory; the mount is always
unmounted (pipecheck.testing.slow_mount). See docs/storage.md.
"""

from __future__ import annotations

import json
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


ADDED_MS = 30
"""The what-if's added latency per read: the mount moved somewhere that much slower."""


def slower_d_ms(root: pathlib.Path, source: str) -> float:
    """D at 16 read threads, measured with the mount ``ADDED_MS`` slower per read."""
    run = pipecheck("dataloader", "--set", source, "--workers", "0", "--threads", "16",
                    "--batches", "20",
                    "--quiet", "--json", "slower.json", cwd=root)
    if run.returncode != 0:
        raise SystemExit(run.stderr.strip())
    result = json.loads((root / "slower.json").read_text())["results"][0]
    return 1e3 * result["loader_time"]["value"]


def main() -> int:
    latency_s = (float(sys.argv[1]) if len(sys.argv) > 1 else 20.0) / 1000
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "data").mkdir()
        (root / "mnt").mkdir()
        write_text_records(root / "data" / "text.array_record")
        source = "source=mnt/text.array_record"
        with mounted(root / "data", root / "mnt", SlowStorage(latency_s)):
            timed = pipecheck("dataloader", "--set", source, "--workers", "0,1",
                              "--threads", "1,16",
                              "--batches", "20", "--json", "run.json", cwd=root)
            cold = pipecheck("dataloader", "--set", source, "--cold", "--quiet", cwd=root)
        whatif = pipecheck("whatif", "run.json", "--read-latency", f"{ADDED_MS}ms",
                           "--workers", "0", "--threads", "16", cwd=root)
        with mounted(root / "data", root / "mnt", SlowStorage(latency_s + ADDED_MS / 1e3)):
            measured = slower_d_ms(root, source)
    print(timed.stdout, end="")
    print(f"\n$ pipecheck dataloader --set {source} --cold")
    print(cold.stderr.strip())
    print(f"(exit {cold.returncode})")
    print(f"\n$ pipecheck whatif run.json --read-latency {ADDED_MS}ms --workers 0 --threads 16")
    print(whatif.stdout.strip() or whatif.stderr.strip())
    print(f"\nmeasured on a mount {ADDED_MS} ms slower a read, 16 threads: "
          f"D/batch {measured:.1f} ms")
    failed = timed.returncode or whatif.returncode
    return failed if failed else int(cold.returncode != 2)


if __name__ == "__main__":
    sys.exit(main())
