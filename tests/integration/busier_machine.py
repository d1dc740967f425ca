"""A compare run whose verdict is inconclusive only because of the machine it ran on is run
once more; any other verdict, right or wrong, is the first run's.

compare measures T, D and R one after another: on the shared test machine another test may
start while R runs and not while T ran, or the machine's own speed may change for a while
(a neighbour on the same host: CPU that no process here shows). Two records say so:

- ``machine_load``: other processes used clearly more CPU during R, decided by the same pure
  function as the verdict (``analysis.machine_load.busier_during_real``);
- R's whole interval lies above the slower of T and D's by the forced-sync margin and the
  sampler found no sync to explain it (the verdict's "unexplained slowdown").

A wrong verdict (input-bound for a compute-bound run, forced-sync without a sync) still fails
at once, and a slowdown that happens twice in a row fails too.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping, TypeVar

from pipecheck.analysis.machine_load import BusierMachine, busier_during_real
from pipecheck.analysis.verdict import slower_than_both
from pipecheck.records.common import Estimate
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


def unexplained_slowdown(record: Mapping[str, Any]) -> bool:
    """The verdict is inconclusive because R's whole interval lies above both T's and D's by
    the forced-sync margin and no sync was found to explain it."""
    if record.get("verdict") != "inconclusive":
        return False
    if any(f.get("kind") == "forced-sync" for f in record.get("findings", ())):
        return False
    est = record.get("estimates", {})
    try:
        t, d, r = (Estimate.from_dict(est[k]) for k in ("target", "loader", "real"))
    except (KeyError, TypeError):
        return False
    return slower_than_both(t, d, r)


def machine_reason(record: Mapping[str, Any]) -> str | None:
    """Why the record's inconclusive verdict is the machine's doing, or None."""
    busier = busier_machine(record)
    if busier is not None:
        return busier.describe()
    if unexplained_slowdown(record):
        return f"an unexplained slowdown of the real-data run ({record['verdict_reason']})"
    return None


def rerun_if_busier(attempt: Callable[[int], tuple[Mapping[str, Any], R]]
                    ) -> tuple[Mapping[str, Any], R]:
    """``attempt(0)``, the compare record and whatever the test needs besides; ``attempt(1)``
    once more only when the first record is inconclusive because of the machine
    (``machine_reason``)."""
    first = attempt(0)
    reason = machine_reason(first[0])
    if reason is None:
        return first
    print(f"compare run again: {reason}", file=sys.stderr)
    return attempt(1)
