"""The integration tests' rerun rule: once more only when the verdict is inconclusive because
of the machine: it got busier during the real-data run, or R is slower than both T and D
with no sync to explain it (hand-made records)."""

from __future__ import annotations

from tests.integration.busier_machine import busier_machine, machine_reason, rerun_if_busier


def record(verdict: str, real_cores: float, target_cores: float = 0.1,
           real_s: tuple[float, float] = (0.050, 0.054), findings: tuple = ()) -> dict:
    def phase(c):
        return {"wall_s": 10.0, "other_cpu_s": 10.0 * c}

    def est(low, high):
        return {"value": (low + high) / 2, "low": low, "high": high, "n": 40}

    return {"verdict": verdict, "verdict_reason": "why", "findings": list(findings),
            "estimates": {"target": est(0.049, 0.051), "loader": est(0.004, 0.006),
                          "real": est(*real_s)},
            "machine_load": {"cores": 2, "target": phase(target_cores),
                             "loader": phase(0.1), "real": phase(real_cores),
                             "target_again": None}}


def attempts(*records: dict):
    made: list[int] = []

    def attempt(n: int) -> tuple[dict, int]:
        made.append(n)
        return records[n], n

    return attempt, made


def test_busier_inconclusive_is_run_once_more():
    attempt, made = attempts(record("inconclusive", 0.9), record("compute-bound", 0.1))
    assert rerun_if_busier(attempt)[1] == 1 and made == [0, 1]
    # and only once: a second busier run is what the test sees
    attempt, made = attempts(record("inconclusive", 0.9), record("inconclusive", 0.9))
    assert busier_machine(rerun_if_busier(attempt)[0]) is not None and made == [0, 1]


def test_any_other_verdict_is_the_first_runs():
    for first in (record("input-bound", 0.9),  # a wrong verdict fails at once
                  record("inconclusive", 0.2),  # even load, R near T: no rerun
                  record("forced-sync", 0.1, real_s=(0.070, 0.080)),  # wrong: fails at once
                  record("inconclusive", 0.1, real_s=(0.070, 0.080),  # a sync was found
                         findings=({"kind": "forced-sync"},)),
                  record("inconclusive", 0.1, real_s=(0.058, 0.080)),  # within the margin
                  {"verdict": "inconclusive", "estimates": {}}):  # no load recorded
        attempt, made = attempts(first, record("compute-bound", 0.1))
        assert rerun_if_busier(attempt)[1] == 0 and made == [0]


def test_an_unexplained_slowdown_is_run_once_more():
    """R's whole interval 20% above T's and D's, no sync found, the machine no busier by the
    processes we can see (a neighbour's CPU): once more, and only once."""
    slow = record("inconclusive", 0.1, real_s=(0.0615, 0.070))
    assert machine_reason(slow) is not None and busier_machine(slow) is None
    attempt, made = attempts(slow, record("compute-bound", 0.1))
    assert rerun_if_busier(attempt)[1] == 1 and made == [0, 1]
    attempt, made = attempts(slow, slow)
    assert rerun_if_busier(attempt)[0] is slow and made == [0, 1]
