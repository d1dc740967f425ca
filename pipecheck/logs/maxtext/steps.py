"""A block's step lines read into numbers: each shape in bulk where it can be, else by
pattern."""

from __future__ import annotations

import numpy as np

from pipecheck.logs.maxtext.by_pattern import read_by_pattern
from pipecheck.logs.maxtext.columns import StepColumns
from pipecheck.logs.maxtext.patterns import SKELETON_DELETE
from pipecheck.logs.maxtext.shaped import read_shaped


def read_steps(lines: list[str]) -> StepColumns:
    """A block's step lines read into numbers: lines of one shape (what is left of them
    without their digits) at once."""
    n = len(lines)
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    shapes = data.translate(None, SKELETON_DELETE)
    first = shapes[:shapes.find(b"\n") + 1]
    if shapes == first * n:
        got = read_shaped(data, lines[0], n)
        return got if got is not None else read_by_pattern(lines)
    by_shape: dict[bytes, list[int]] = {}
    for k, shape in enumerate(shapes.split(b"\n")[:n]):
        by_shape.setdefault(shape, []).append(k)
    out = StepColumns.empty(n)
    for members in by_shape.values():
        sub = [lines[k] for k in members]
        part = None
        if len(sub) > 1:
            part = read_shaped(("\n".join(sub) + "\n").encode("utf-8", "surrogatepass"),
                                sub[0], len(sub))
        out.put(np.asarray(members), part if part is not None else read_by_pattern(sub))
    return out
