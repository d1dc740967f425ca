"""A jax.profiler capture of a window of steps: started before step ``a`` is fetched,
stopped before step ``b`` (``Monitor(profile_steps=range(a, b))``, ``compare --profile``).

Starting and stopping the profiler are the only calls made in the loop, at the window's two
edges; neither syncs with the device. The capture is written to ``directory`` as
``jax.profiler.start_trace`` writes it (``plugins/profile/<run>/<host>.xplane.pb``), for
``pipecheck profile DIR``, XProf or Perfetto.
"""

from __future__ import annotations

import os

from pipecheck.errors import ConfigError
from pipecheck.measure.faults import Faults

DEFAULT_PROFILE_DIR = "pipecheck-profile"
"""Where a window is captured when no folder is named."""


class ProfileWindow:
    """Start the profiler at step ``steps.start`` and stop it at ``steps.stop`` (or at
    ``close``, when the loop ends inside the window)."""

    def __init__(self, steps: range, directory: str | os.PathLike[str] = DEFAULT_PROFILE_DIR,
                 faults: Faults | None = None):
        if not isinstance(steps, range) or steps.step != 1 or len(steps) < 1 or steps.start < 0:
            raise ConfigError(f"profile_steps must be a non-empty range(a, b) of step numbers "
                              f"with 0 <= a < b, got {steps!r}")
        self.steps = steps
        self.directory = os.fspath(directory)
        self.active = False
        self.done = False
        self.faults = faults
        """Inside a user's loop (a Monitor's): where a capture that cannot start or stop is
        reported instead of raised (None: raised, as a ConfigError)."""

    def at_step(self, index: int) -> None:
        """Called before step ``index`` is fetched."""
        if index == self.steps.start and not self.active and not self.done:
            # lazy: the profiler is imported only when a window is captured
            import jax

            try:
                jax.profiler.start_trace(self.directory)
            except Exception as e:  # noqa: BLE001 - in a user's loop, reported (faults.py)
                self.done = True
                if self.faults is not None:
                    self.faults.report("the profiler window", e,
                                       f"steps {self.steps.start}-{self.steps.stop - 1} are "
                                       f"not captured (is another capture running?)")
                    return
                raise ConfigError(f"cannot start the profiler for steps {self.steps.start}-"
                                  f"{self.steps.stop - 1}: {e} (is another capture running?)"
                                  ) from None
            self.active = True
        elif index == self.steps.stop and self.active:
            self.close()

    def close(self) -> None:
        """Stop the capture if it is running (the loop ended inside the window)."""
        if self.active:
            # lazy: see at_step
            import jax

            self.active = False
            self.done = True
            try:
                jax.profiler.stop_trace()
            except Exception as e:  # noqa: BLE001 - in a user's loop, reported (faults.py)
                if self.faults is None:
                    raise
                self.faults.report("the profiler window", e,
                                   f"the capture of steps {self.steps.start}-"
                                   f"{self.steps.stop - 1} may be incomplete")
