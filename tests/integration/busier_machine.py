"""A compare run whose verdict is inconclusive only because the machine got busier during
its real-data run (another test started beside it) is run once more; any other verdict,
right or wrong, is the first run's.

compare measures T, D and R one after another: on the shared test machine another test may
start while R runs and not while T ran. The record says so (``machine_load``), decided by
the same pure function as the verdict (``analysis.machine_load.busier_during_real``), so a
wrong verdict still fails at once, and a machine that is busy the whole time is not retried.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping, TypeVar

from pipecheck.analysis.machine_load import BusierMachine, busier_during_real
from pipecheck.records.machine_load import MachineLoad

R = TypeVar("R")


def busier_machine(record: Mapping[str, Any]) -> BusierMachine | None:
    """The loads, when a compare record's verdict is inconclusive because the machine got
    busier during its real-data run; None otherwise."""
    load = record.get("machine_load")
    if record.get("verdict") != "inconclusive" or load is None:
        return None
    est = record["estimates"]
    return busier_during_real(MachineLoad.from_dict(load), est["target"]["value"],
                              est["loader"]["value"])


def rerun_if_busier(attempt: Callable[[int], tuple[Mapping[str, Any], R]]
                    ) -> tuple[Mapping[str, Any], R]:
    """``attempt(0)``, the compare record and whatever the test needs besides; ``attempt(1)``
    once more only when the first record is inconclusive because the machine got busier."""
    first = attempt(0)
    busier = busier_machine(first[0])
    if busier is None:
        return first
    print(f"compare run again: {busier.describe()}", file=sys.stderr)
    return attempt(1)
