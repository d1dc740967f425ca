"""A user's training loop that ends badly, for tests/integration/test_monitor_durable.py.

    python durable_loop.py OUT STEPS END AT SAVE_EVERY_S [user-handler]

END is how the loop ends at step AT: ``exception`` (raised in the loop body after step AT),
``wait`` (after step AT it prints ``ready`` and sleeps: the test sends a signal), ``pause``
(sleeps SAVE_EVERY_S after step AT so the next step writes the record, then prints
``ready`` and sleeps), ``none`` (runs to the end). A loop that prints ``ready`` and gets no
signal within HOLD_S fails (exit 1). With ``user-handler`` the script installs
its own SIGTERM handler first (it prints a line and exits with status 3).
"""

import signal
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

HOLD_S = 300.0
"""How long the loop waits for the test's signal after ``ready``: far past any test's wait
(a loop never signalled fails, exit 1, rather than going on as if it had been)."""


@jax.jit
def train_step(w, x):
    h = jnp.tanh(x @ w)
    loss = jnp.mean(h * h)
    return w - 1e-3 * loss, {"loss": loss}


def loader(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        yield rng.standard_normal((16, 32), dtype=np.float32)


def user_handler(signum, frame):
    print("user handler ran", flush=True)
    sys.exit(3)


def main() -> None:
    out, steps, end, at, every = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
        float(sys.argv[5])
    # a background child starts with SIGINT ignored: give it Python's Ctrl-C back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if "user-handler" in sys.argv[6:]:
        signal.signal(signal.SIGTERM, user_handler)
    w = jnp.eye(32, dtype=jnp.float32)
    with Monitor(config={"test": "durable"}, save_to=out, save_every_s=every) as mon:
        for i, x in enumerate(mon.batches(loader(steps))):
            w, metrics = mon.step(train_step, w, x)
            print(f"step {i}", flush=True)
            if i == at and end == "exception":
                raise RuntimeError(f"loss went bad at step {i}")
            if i == at and end == "pause":
                time.sleep(every + 0.05)
            if i == at + (end == "pause") and end in ("wait", "pause"):
                print("ready", flush=True)
                hold = time.monotonic() + HOLD_S
                while time.monotonic() < hold:  # the host's work: back in Python often
                    time.sleep(0.1)
                sys.exit(f"no signal came within {HOLD_S:g} s of 'ready'")
    print("finished", flush=True)


if __name__ == "__main__":
    main()
