"""Step lines read into numbers (``StepColumns``), whichever read read them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass
class StepColumns:
    """Step lines read into numbers, in line order (a block's, or one shape's of it)."""

    number: np.ndarray
    """Step numbers; -1: unreadable."""
    has_loss: np.ndarray
    own: np.ndarray
    """Which lines hold an absl header before their mark."""
    day: np.ndarray
    secs: np.ndarray
    """The header's day number and seconds in the day (0 without one)."""
    decimals: np.ndarray
    """Decimals of the header's seconds, to write its clock back (-1: none shown, -2: the
    clock text is in ``clocks``)."""
    clocks: dict[int, str]
    cols: dict[str, np.ndarray]
    metrics: dict[str, np.ndarray]

    @classmethod
    def empty(cls, n: int) -> StepColumns:
        return cls(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool),
                   np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n),
                   np.full(n, -2, dtype=np.int8), {}, {}, {})

    def put(self, idx: np.ndarray, part: StepColumns) -> None:
        """``part`` (the lines at ``idx``) into these columns."""
        n = self.number.size
        for name in ("number", "has_loss", "own", "day", "secs", "decimals"):
            getattr(self, name)[idx] = getattr(part, name)
        for k, clock in part.clocks.items():
            self.clocks[int(idx[k])] = clock
        for mine, theirs in ((self.cols, part.cols), (self.metrics, part.metrics)):
            for key, col in theirs.items():
                mine.setdefault(key, np.full(n, math.nan))[idx] = col

    def clock(self, k: int) -> str:
        """The clock text of line ``k``'s header."""
        if self.decimals[k] == -2:
            return self.clocks[k]
        dec = int(self.decimals[k])
        t = float(self.secs[k])
        hh, rest = divmod(int(t), 3600)
        mm = rest // 60
        frac = max(0, dec)
        whole = round((t - hh * 3600 - mm * 60) * 10 ** frac)
        ss, part = divmod(whole, 10 ** frac)
        return f"{hh:02d}:{mm:02d}:{ss:02d}" + (f".{part:0{dec}d}" if dec >= 0 else "")

    @staticmethod
    def join(parts: Sequence[StepColumns]) -> StepColumns:
        """The columns of consecutive parts as one."""
        out = StepColumns.empty(0)
        if not parts:
            return out
        for name in ("number", "has_loss", "own", "day", "secs", "decimals"):
            setattr(out, name, np.concatenate([getattr(p, name) for p in parts]))
        first = 0
        for p in parts:
            out.clocks.update((first + k, clock) for k, clock in p.clocks.items())
            first += p.number.size
        for name in ("cols", "metrics"):
            keys = list(dict.fromkeys(k for p in parts for k in getattr(p, name)))
            setattr(out, name, {key: np.concatenate([
                getattr(p, name).get(key, np.full(p.number.size, math.nan)) for p in parts])
                for key in keys})
        return out
