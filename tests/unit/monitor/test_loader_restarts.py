"""Loader restarts in a Monitor loop on a simulated device: every ``batches`` call is a pass
whose first batch (the iterator's creation included) is a ``LoaderStart``; the steps that
restart are tagged ``loader_start``, kept out of the steady state, explained as a loader
start (not as the eval span that ran in the same step), and a material cost is a
``loader-restart`` finding with the fix in Grain's terms."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from pipecheck.monitor import Monitor
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.fakes import SimDevice

C = 0.05
START_S = 2.0
EVAL_S = 0.5
STEPS_PER_EPOCH = 20
EPOCHS = 4


class RestartingLoader:
    """A loader whose every iterator starts its workers first (``START_S``), as a
    ``grain.DataLoader`` iterated again does; batches then come at once."""

    def __init__(self, dev: SimDevice, n: int) -> None:
        self.dev, self.n, self.iterators = dev, n, 0

    def __iter__(self) -> Iterator[int]:
        self.iterators += 1
        self.dev.sleep(START_S)  # the workers start when the iterator is made
        return iter(range(self.n))


def epoch_loop(dev: SimDevice, mon: Monitor, loader: RestartingLoader, evals: bool) -> None:
    state: Any = None
    for _ in range(EPOCHS):
        for batch in mon.batches(loader):
            state, _ = mon.step(dev.step, state, batch)
        if evals:
            with mon.span("eval"):
                dev.read(state)
                dev.sleep(EVAL_S)


def monitor_for(dev: SimDevice) -> Monitor:
    return Monitor(clock=dev.clock, read_loss=dev.read, locate_syncs=False,
                   watch_compiles=False, watch_gc=False, env={"backend": "sim"})


@pytest.mark.parametrize("evals", [False, True])
def test_each_epochs_new_iterator_is_a_loader_start_named_as_such(evals: bool) -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    loader = RestartingLoader(dev, STEPS_PER_EPOCH)
    epoch_loop(dev, mon, loader, evals)
    r = mon.finish()
    assert loader.iterators == EPOCHS
    assert [s.index for s in r.loader_starts] == list(range(EPOCHS))
    assert [s.wait_s for s in r.loader_starts] == pytest.approx([START_S] * EPOCHS)
    restart_steps = [s.step for s in r.loader_starts[1:]]
    assert restart_steps == [STEPS_PER_EPOCH * k - 1 for k in range(1, EPOCHS)]
    by = {s.step: s for s in r.steps}
    for step in restart_steps:
        assert "loader_start" in by[step].tags
        assert ("eval" in by[step].tags) == evals
        assert by[step].spans["data_wait"] == pytest.approx(START_S)
    causes = {a.step: a.cause for a in r.anomalies}
    assert all(causes[step] == "loader start" for step in restart_steps), r.anomalies
    assert r.step_time.summary.median == pytest.approx(C)
    (finding,) = [f for f in r.findings if f.kind == "loader-restart"]
    assert f"each of {EPOCHS - 1} passes after the first" in finding.message
    assert finding.numbers["lost_s"] == pytest.approx((EPOCHS - 1) * START_S, rel=0.01)
    assert ("an eval span ran in the same step at 3 of them" in finding.message) == evals
    assert "repeat" in finding.fix and "num_epochs" in finding.fix
    again = store.load_dict(json.loads(store.record_to_json(r)))
    assert isinstance(again, MonitorResult) and again.loader_starts == r.loader_starts


def test_one_pass_has_a_loader_start_and_no_restart_finding() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    state: Any = None
    for batch in mon.batches(RestartingLoader(dev, 3 * STEPS_PER_EPOCH)):
        state, _ = mon.step(dev.step, state, batch)
    r = mon.finish()
    assert len(r.loader_starts) == 1 and r.loader_starts[0].step == 0
    assert not [f for f in r.findings if f.kind == "loader-restart"]
    assert not any("loader_start" in s.tags for s in r.steps)


def test_cheap_restarts_are_no_finding() -> None:
    """Restarts that cost less than MIN_RESTART_SHARE of the run are left unsaid."""
    from pipecheck.analysis.first_batch import MIN_RESTART_SHARE, loader_restart_findings
    from pipecheck.records.common import LoaderStart

    starts = [LoaderStart(0, 0, 1.0), LoaderStart(1, 99, 0.3), LoaderStart(2, 199, 0.3)]
    assert loader_restart_findings(starts, [], 0.6 / MIN_RESTART_SHARE * 1.01) == []
    assert len(loader_restart_findings(starts, [], 0.6 / MIN_RESTART_SHARE * 0.99)) == 1
