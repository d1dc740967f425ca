"""A user's training loop with Monitor(save_to=..., tensorboard_dir=...), for
tests/integration/test_monitor_tensorboard.py and test_watch_cli.py.

    python tensorboard_loop.py RUN.json TBDIR STEPS STEP_SLEEP_S SAVE_EVERY_S TB_EVERY_S [WAIT_AT]

Each step sleeps STEP_SLEEP_S in its body (the host's work) and prints ``step I``. With
WAIT_AT, after step WAIT_AT it prints ``ready`` and sleeps (the test sends a signal).
TBDIR ``-``: no ``tensorboard_dir`` (tensorboardX need not be installed).
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor


@jax.jit
def train_step(w, x):
    h = jnp.tanh(x @ w)
    loss = jnp.mean(h * h)
    return w - 1e-3 * loss, {"loss": loss}


def loader(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        yield rng.standard_normal((16, 32), dtype=np.float32)


def main() -> None:
    run, tbdir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sleep_s, save_every, tb_every = (float(a) for a in sys.argv[4:7])
    wait_at = int(sys.argv[7]) if len(sys.argv) > 7 else -1
    w = jnp.eye(32, dtype=jnp.float32)
    with Monitor(config={"test": "tensorboard"}, save_to=run, save_every_s=save_every,
                 tensorboard_dir=None if tbdir == "-" else tbdir,
                 tensorboard_every_s=tb_every) as mon:
        for i, x in enumerate(mon.batches(loader(steps))):
            w, metrics = mon.step(train_step, w, x)
            time.sleep(sleep_s)
            print(f"step {i}", flush=True)
            if i == wait_at:
                print("ready", flush=True)
                for _ in range(600):
                    time.sleep(0.1)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
