"""A jitted loop that reads the device's result on the host in one chosen way each step,
captured with the real ``jax.profiler`` (the captures of tests/data/host_reads/).

usage: python tests/data/host_read_loop.py OUT_DIR READ [--steps N]

READ is one of ``item float int asarray device_get tolist block print none``; each read is
the one line of its own function ``read_<READ>`` below, so a test can name the line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import jax
import jax.numpy as jnp
import numpy as np


def read_item(x):
    return x.item()  # HOST-READ item


def read_float(x):
    return float(x)  # HOST-READ float


def read_int(x):
    return int(x)  # HOST-READ int


def read_asarray(x):
    return np.asarray(x)  # HOST-READ asarray


def read_device_get(x):
    return jax.device_get(x)  # HOST-READ device_get


def read_tolist(x):
    return x.tolist()  # HOST-READ tolist


def read_block(x):
    return jax.block_until_ready(x)  # HOST-READ block


def read_print(x):
    print(x)  # HOST-READ print


READS = {"item": read_item, "float": read_float, "int": read_int, "asarray": read_asarray,
         "device_get": read_device_get, "tolist": read_tolist, "block": read_block,
         "print": read_print, "none": None}


@jax.jit
def train_step(w, x):
    for _ in range(4):
        w = jnp.tanh(w @ x)
    return w, jnp.sum(w)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("read", choices=sorted(READS))
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args(argv)
    read = READS[a.read]
    w = jnp.eye(384) * 0.5
    x = jnp.ones((384, 384)) / 384
    w, loss = train_step(w, x)
    jax.block_until_ready(w)
    sink = io.StringIO()
    jax.profiler.start_trace(a.out)
    with contextlib.redirect_stdout(sink):
        for i in range(a.steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                w, loss = train_step(w, x)
                if read is not None:
                    read(loss)
    time.sleep(0.5)  # the device finishes: the loop's end is not a read inside a step
    jax.block_until_ready(w)
    jax.profiler.stop_trace()


if __name__ == "__main__":
    main()
