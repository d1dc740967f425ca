"""Make the committed captures of tests/data/host_reads/ with this machine's JAX.

usage: python tests/data/make_host_read_captures.py [READ ...]   (default: all)

Each is ``host_read_loop.py READ`` under the real ``jax.profiler``; its trace JSON (gzip, a
few kB) is kept as ``host_reads/jax-VERSION/READ.trace.json.gz``.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
LOOP = HERE / "host_read_loop.py"
READS = ("item", "float", "int", "asarray", "device_get", "tolist", "block", "print", "none")


def capture(read: str, out: pathlib.Path, python: str = sys.executable) -> pathlib.Path:
    """Run the loop reading the device's result by ``read`` under the profiler; the path
    of its trace JSON, copied to ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([python, str(LOOP), tmp, read], check=True, timeout=300)
        (found,) = pathlib.Path(tmp).rglob("*.trace.json.gz")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, out)
    return out


def main(argv: list[str]) -> None:
    version = subprocess.run([sys.executable, "-c", "import jax; print(jax.__version__)"],
                             check=True, capture_output=True, text=True).stdout.strip()
    for read in argv or READS:
        print(capture(read, HERE / "host_reads" / f"jax-{version}" / f"{read}.trace.json.gz"))


if __name__ == "__main__":
    main(sys.argv[1:])
