"""The integration tests' rerun rule: once more only when the verdict is inconclusive because
the machine got busier during the real-data run (hand-made records)."""

from __future__ import annotations

from tests.integration.busier_machine import busier_machine, rerun_if_busier


def record(verdict: str, real_cores: float, target_cores: float = 0.1) -> dict:
    def phase(c):
        return {"wall_s": 10.0, "other_cpu_s": 10.0 * c}

    return {"verdict": verdict,
            "estimates": {"target": {"value": 0.050}, "loader": {"value": 0.005}},
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
                  record("inconclusive", 0.2),  # even load: interference, no rerun
                  {"verdict": "inconclusive", "estimates": {}}):  # no load recorded
        attempt, made = attempts(first, record("compute-bound", 0.1))
        assert rerun_if_busier(attempt)[1] == 0 and made == [0]
