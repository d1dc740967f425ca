"""ProfileWindow: a bad window is a one-line config error; the capture starts at the window's
first step and stops at its end (a real jax.profiler capture)."""

import pytest

from pipecheck.errors import ConfigError
from pipecheck.measure.profile_window import ProfileWindow


@pytest.mark.parametrize("steps", [range(5, 5), range(-1, 3), range(0, 10, 2), [1, 2]])
def test_bad_window(steps):
    with pytest.raises(ConfigError, match="profile_steps must be a non-empty range"):
        ProfileWindow(steps, "x")


def test_window_starts_and_stops_at_its_edges(tmp_path):
    w = ProfileWindow(range(2, 4), tmp_path)
    for i in range(2):
        w.at_step(i)
    assert not w.active and not list(tmp_path.iterdir())
    w.at_step(2)
    assert w.active
    w.at_step(3)
    assert w.active
    w.at_step(4)
    assert not w.active and w.done
    assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))
    w.at_step(2)  # a window is captured once
    assert not w.active
