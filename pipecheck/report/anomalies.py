"""Anomalous steps as text: one table for every run kind (pure)."""

from __future__ import annotations

import math
from typing import Sequence

from pipecheck.records.common import Anomaly
from pipecheck.report.blocks import Part, Table
from pipecheck.units import ms

MAX_LISTED_ANOMALIES = 12
"""Rows per run in the text report; the JSON record holds every anomaly."""


HEADING = "anomalous steps (kept out of the steady state):"
"""The line above one run's anomalies."""


def anomalies_part(runs: Sequence[tuple[str, Sequence[Anomaly]]]) -> Table:
    """Anomalous steps of one or more runs as a report part (a table: the page shows it as
    one, wrapping its long evidence); with one unlabelled run, no run column."""
    table: list[Sequence[object]] = []
    for label, anomalies in runs:
        for an in anomalies[:MAX_LISTED_ANOMALIES]:
            ratio = "-" if not math.isfinite(an.ratio) else f"{an.ratio:.2f}x"
            table.append([label, an.step, ms(an.time_s), ratio, an.cause,
                          an.evidence])
        if len(anomalies) > MAX_LISTED_ANOMALIES:
            table.append([label, "...", "", "", f"and {len(anomalies) - MAX_LISTED_ANOMALIES} "
                          "more (see --json)", ""])
    headers = ["run", "step", "time", "x median", "likely cause", "evidence"]
    if len(runs) == 1 and not runs[0][0]:
        headers, table = headers[1:], [row[1:] for row in table]
    return Table(table, headers)


def anomalies_parts(anomalies: Sequence[Anomaly], prefix: str = "") -> list[Part]:
    """The anomalies of one run under a heading that says what was done with them."""
    return [prefix + HEADING, anomalies_part([("", anomalies)])]
