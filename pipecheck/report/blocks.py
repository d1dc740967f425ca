"""A report as data: the parts a text report is made of (lines and tables), rendered to
text here and to HTML by ``report/page.py``, so the terminal and the page say the same
words from one source."""

from __future__ import annotations

import dataclasses
from typing import Sequence, Union

from tabulate import tabulate


@dataclasses.dataclass(frozen=True)
class Table:
    """A table of cells (already formatted as text) with optional headers."""

    rows: Sequence[Sequence[object]]
    headers: Sequence[str] = ()
    colalign: tuple[str, ...] | None = None

    def text(self) -> str:
        return tabulate(self.rows, headers=list(self.headers), tablefmt="simple",
                        disable_numparse=True, colalign=self.colalign)


Part = Union[str, Table]
"""A line (or a block of lines kept together), or a table."""


def render_text(parts: Sequence[Part]) -> str:
    """The terminal report: the parts one after the other, tables drawn by tabulate."""
    return "\n".join(p.text() if isinstance(p, Table) else p for p in parts)
