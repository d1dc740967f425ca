"""Hand-written SVG charts for the HTML page: pure functions from numbers to SVG text.

Every chart is a fixed-size ``<svg>`` with a ``viewBox`` (it scales with the page), axes
with a few ticks, and ``<title>`` children on marks so the browser shows the details on
hover without any script. Long series are binned before they get here (``report/page.py``
uses ``plot.binned_band``): no chart draws more than a few thousand marks.
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Sequence

import numpy as np

WIDTH, HEIGHT = 900, 260
"""The drawing's size in SVG units (the page scales it to the column's width)."""
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 34
"""Margins for the axis labels."""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclasses.dataclass(frozen=True)
class Scale:
    """Maps data values onto a pixel range, linear or logarithmic (positive data only)."""

    lo: float
    hi: float
    a: float
    b: float
    log: bool = False

    def _t(self, v: float) -> float:
        return math.log10(max(v, 1e-12)) if self.log else v

    def __call__(self, v: float) -> float:
        lo, hi = self._t(self.lo), self._t(self.hi)
        span = hi - lo or 1.0
        return self.a + (self._t(v) - lo) / span * (self.b - self.a)

    def many(self, v: np.ndarray) -> np.ndarray:
        lo, hi = self._t(self.lo), self._t(self.hi)
        t = np.log10(np.maximum(v, 1e-12)) if self.log else v
        return self.a + (t - lo) / (hi - lo or 1.0) * (self.b - self.a)

    def ticks(self, n: int = 5) -> list[float]:
        if self.log:
            first, last = math.floor(math.log10(max(self.lo, 1e-12))), math.ceil(
                math.log10(max(self.hi, 1e-12)))
            steps = (1, 2, 5) if last - first <= 3 else (1,)
            return [m * 10.0 ** e for e in range(first, last + 1) for m in steps
                    if self.lo <= m * 10.0 ** e <= self.hi] or [self.lo, self.hi]
        step = nice_step((self.hi - self.lo) / max(n, 1))
        start = math.ceil(self.lo / step) * step
        return [start + i * step for i in range(int((self.hi - start) / step) + 1)]


def nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``raw``."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    p = 10.0 ** math.floor(math.log10(raw))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= raw)


def tick_text(v: float) -> str:
    """A tick label: ``250``, ``12.5``, ``200k``, ``1.5M``."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def frame(x: Scale, y: Scale, xlabel: str, ylabel: str, xticks: bool = True) -> list[str]:
    """Axes, grid lines and tick labels of a chart."""
    out = [f'<g class="axes"><line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
           f'y2="{HEIGHT - BOTTOM}"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" '
           f'y2="{HEIGHT - BOTTOM}"/>']
    for v in y.ticks():
        py = y(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" '
                   f'y2="{py:.1f}"/><text x="{LEFT - 4}" y="{py + 3:.1f}" '
                   f'text-anchor="end">{tick_text(v)}</text>')
    if xticks:
        for v in x.ticks(8):
            px = x(v)
            out.append(f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 14}" '
                       f'text-anchor="middle">{tick_text(v)}</text>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 4}" '
               f'text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text transform="translate(12,{(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
               f'text-anchor="middle">{esc(ylabel)}</text></g>')
    return out


def svg(body: Sequence[str], label: str, cls: str = "chart", height: int = HEIGHT) -> str:
    return (f'<svg class="{cls}" viewBox="0 0 {WIDTH} {height}" role="img" '
            f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">'
            + "".join(body) + "</svg>")


def points(xs: np.ndarray, ys: np.ndarray) -> str:
    """An SVG ``points`` list, one decimal per coordinate."""
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs.tolist(), ys.tolist(), strict=True))


def polyline(xs: np.ndarray, ys: np.ndarray, color: str, cls: str = "line") -> str:
    return f'<polyline class="{cls}" stroke="{color}" points="{points(xs, ys)}"/>'


def polygon(xs: np.ndarray, lows: np.ndarray, highs: np.ndarray, color: str,
            opacity: float) -> str:
    """The area between ``lows`` and ``highs`` over ``xs``."""
    pts = points(np.concatenate([xs, xs[::-1]]), np.concatenate([highs, lows[::-1]]))
    return f'<polygon fill="{color}" fill-opacity="{opacity}" points="{pts}"/>'


def rect(x: float, y: float, w: float, h: float, color: str, title: str = "",
         cls: str = "") -> str:
    tip = f"<title>{esc(title)}</title>" if title else ""
    c = f' class="{cls}"' if cls else ""
    return (f'<rect{c} x="{x:.2f}" y="{y:.2f}" width="{max(w, 0.0):.2f}" '
            f'height="{max(h, 0.0):.2f}" fill="{color}">{tip}</rect>')


def marker(x: float, y: float, color: str, title: str, cls: str = "mark",
           radius: float = 4.0) -> str:
    return (f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{radius:g}" fill="{color}">'
            f"<title>{esc(title)}</title></circle>")


def legend(items: Sequence[tuple[str, str]]) -> str:
    """A row of coloured keys above a chart (HTML, not SVG: it wraps with the page)."""
    keys = "".join(f'<span class="key"><i style="background:{c}"></i>{esc(name)}</span>'
                   for name, c in items)
    return f'<div class="legend">{keys}</div>'
