"""The wrapping of MaxText's loop pieces by ``pipecheck.monitor.maxtext`` (no MaxText
needed: the pieces are stand-ins with MaxText's shapes; the real loop is tested in
tests/integration/test_maxtext.py)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from pipecheck.monitor import maxtext as mm


class FakeMonitor:
    """Records the spans entered and the steps called, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        self.events.append(f"{name}(")
        yield
        self.events.append(f"){name}")

    def step(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.events.append("step")
        return fn(*args, **kwargs)


class Loader:
    def load_next_batch(self, rampup_manager: object = None) -> str:
        return "batch"


class Logger:
    def __init__(self) -> None:
        self.written: list[int] = []

    def buffer_and_write_metrics(self, metrics: object, step: int, delta: object = None) -> None:
        self.written.append(step)


def test_the_loss_is_read_where_maxtexts_train_step_returns_it() -> None:
    assert mm.maxtext_loss(("state", {"scalar": {"learning/loss": 2.5}})) == 2.5


def test_each_piece_is_wrapped_once_and_timed_as_its_span() -> None:
    mon = FakeMonitor()
    device = {"p_train_step": lambda state, batch: (state, {"scalar": {}}),
              "p_eval_step": lambda state, batch: {"eval": 1}}
    host = {"data_loader": Loader(), "metric_logger_instance": Logger()}
    for _ in range(3):  # MaxText's loop hands the same dicts to every iteration
        mm._wrap_iteration(mon, device, host)  # type: ignore[arg-type]
    batch = host["data_loader"].load_next_batch(rampup_manager=None)
    out = device["p_train_step"]("s", batch)
    device["p_eval_step"]("s", batch)
    host["metric_logger_instance"].buffer_and_write_metrics(out[1], 7)
    assert mon.events == ["data_wait(", ")data_wait", "step", "eval(", ")eval", "log(", ")log"]
    assert out == ("s", {"scalar": {}}) and host["metric_logger_instance"].written == [7]


def test_no_eval_step_is_left_alone() -> None:
    device = {"p_train_step": lambda: None, "p_eval_step": None}
    mm._wrap_iteration(FakeMonitor(), device,  # type: ignore[arg-type]
                       {"data_loader": Loader(), "metric_logger_instance": Logger()})
    assert device["p_eval_step"] is None


def test_tensorboard_dir_reaches_the_monitor(monkeypatch: Any) -> None:
    got: list[tuple[Any, ...]] = []
    monkeypatch.setattr(mm, "run", lambda *a: got.append(a))
    mm.main(["--save", "run.json", "--tensorboard-dir", "tb", "cfg.yml", "steps=5"])
    mm.main(["--save", "run.json", "cfg.yml"])
    assert got == [("run.json", ["cfg.yml", "steps=5"], False, "tb"),
                   ("run.json", ["cfg.yml"], False, None)]
