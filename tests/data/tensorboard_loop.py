"""A user's training loop with Monitor(save_to=..., tensorboard_dir=...), for
tests/integration/test_monitor_tensorboard.py and test_watch_cli.py.

    python tensorboard_loop.py RUN.json TBDIR STEPS STEP_SLEEP_S SAVE_EVERY_S TB_EVERY_S \
        [WAIT_AT [HOLD]]

Each step sleeps STEP_SLEEP_S in its body (the host's work) and prints ``step I``. With
WAIT_AT, after step WAIT_AT it waits until the steps handed to the event file are on disk,
prints ``ready`` and holds in its body: HOLD ``signal`` (the default) sleeps there until the
test's signal ends the process, ``stdin`` until the test writes a line to its stdin (or
closes it), then goes on to the end. Either way a test orders its events by this handshake,
never by how long the loop takes; a hold the test never ends fails after HOLD_S (exit 1).
TBDIR ``-``: no ``tensorboard_dir`` (tensorboardX need not be installed).
"""

import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

HOLD_S = 300.0
"""How long the loop holds at WAIT_AT at most: far past any test's wait."""


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
    hold = sys.argv[8] if len(sys.argv) > 8 else "signal"
    w = jnp.eye(32, dtype=jnp.float32)
    with Monitor(config={"test": "tensorboard"}, save_to=run, save_every_s=save_every,
                 tensorboard_dir=None if tbdir == "-" else tbdir,
                 tensorboard_every_s=tb_every) as mon:
        for i, x in enumerate(mon.batches(loader(steps))):
            w, metrics = mon.step(train_step, w, x)
            time.sleep(sleep_s)
            print(f"step {i}", flush=True)
            if i == wait_at:
                drained(mon)
                print("ready", flush=True)
                hold_until_released(hold)
    print("finished", flush=True)


def drained(mon: Monitor) -> None:
    """Wait until the TensorBoard writer thread wrote every step handed to it (the steps of
    the folds so far): ``ready`` then means they are on disk, however loaded the machine."""
    scalars = getattr(mon, "_scalars", None)  # the Monitor's ScalarWriter, if any
    if scalars is not None and not scalars.drain(HOLD_S):
        sys.exit(f"the event file's writer did not drain within {HOLD_S:g} s")


def hold_until_released(hold: str) -> None:
    """Hold in the loop's body: until the test's signal (``signal``: sleeping, back in
    Python often, as the host's work between steps is) or until a line (or the end) on
    stdin (``stdin``)."""
    if hold == "stdin":
        released = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.readline(), released.set()),
                         daemon=True).start()
        if released.wait(HOLD_S):
            return
    else:
        end = time.monotonic() + HOLD_S
        while time.monotonic() < end:
            time.sleep(0.1)
    sys.exit(f"not released within {HOLD_S:g} s of 'ready'")


if __name__ == "__main__":
    main()
