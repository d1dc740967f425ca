"""Did the machine's speed change during a run? T measured before and after, compared."""

from __future__ import annotations

import math

from pipecheck.units import ms

DRIFT_TOLERANCE = 0.15
"""T before and T after the real-data run differing by more than 15% is reported as drift."""


def drift_warning(before_s: float, after_s: float) -> str | None:
    """A warning when the median target step time moved by more than ``DRIFT_TOLERANCE``."""
    if not (math.isfinite(before_s) and math.isfinite(after_s)) or before_s <= 0:
        return None
    change = after_s / before_s - 1.0
    if abs(change) > DRIFT_TOLERANCE:
        return (f"the target step time drifted by {100 * change:+.0f}% during the run "
                f"({ms(before_s)} before, {ms(after_s)} after): the machine's speed "
                "changed; compare figures with care or re-run on a quieter machine")
    return None
