"""A ``pipecheck.Monitor`` inside MaxText's own training loop, for a run started MaxText's
way: the same config and overrides, one line changed.

    python -m maxtext.trainers.pre_train.train my_run.yml steps=1000          # MaxText's
    python -m pipecheck.monitor.maxtext --save run.json my_run.yml steps=1000  # measured

MaxText's ``train.main`` runs as it is; before it starts, its loop's pieces are wrapped
(``install``), each the first time ``training_loop_iteration`` sees it:

- ``data_wait``: its ``DataLoader.load_next_batch`` (the batch fetch, device put included);
- ``dispatch`` and the lagged ``sync``: its jitted train step, through ``Monitor.step`` (the
  loss is ``metrics["scalar"]["learning/loss"]``; the previous step's is read, never the
  one just dispatched);
- ``checkpoint``: ``checkpointing.save_checkpoint``, which ``maybe_save_checkpoint`` calls
  only for a step it saves (orbax's wait for an earlier async save included);
- ``eval``: each call of its jitted eval step; ``log``: its metric logger's
  ``buffer_and_write_metrics`` (the host read of the previous step's metrics).

The sync locator samples the loop's thread as in any Monitor run, so a sync of MaxText's
(its metric logger's ``np.asarray``) is named by file and line. The record is written with
``Monitor(save_to=...)``: kept on disk while the run goes and finished at its end. MaxText
is imported only here (``import pipecheck`` never imports it).
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any, Callable, Sequence

from pipecheck.monitor.loop import Monitor

LOSS_PATH = ("scalar", "learning/loss")
"""Where MaxText's train step returns its loss: ``(state, metrics)``, ``metrics[...][...]``."""
WRAPPED = "_pipecheck_wrapped"
"""The attribute marking a function this module wrapped (wrapped once, however often seen)."""


def maxtext_loss(out: Any) -> Any:
    """The loss in the output of MaxText's train step, ``(state, metrics)``."""
    metrics = out[1]
    return metrics[LOSS_PATH[0]][LOSS_PATH[1]]


def _spanned(mon: Monitor, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, WRAPPED, False):
        return fn

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        with mon.span(name):
            return fn(*args, **kwargs)

    setattr(timed, WRAPPED, True)
    return timed


def _stepped(mon: Monitor, fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, WRAPPED, False):
        return fn

    def train_step(*args: Any, **kwargs: Any) -> Any:
        return mon.step(fn, *args, **kwargs)

    train_step.__name__ = getattr(fn, "__name__", "train_step")
    setattr(train_step, WRAPPED, True)
    return train_step


def _wrap_iteration(mon: Monitor, device: dict[str, Any], host: dict[str, Any]) -> None:
    """Wrap this iteration's pieces (a no-op for those already wrapped)."""
    device["p_train_step"] = _stepped(mon, device["p_train_step"])
    if device.get("p_eval_step") is not None:
        device["p_eval_step"] = _spanned(mon, "eval", device["p_eval_step"])
    loader = host["data_loader"]
    loader.load_next_batch = _spanned(mon, "data_wait", loader.load_next_batch)
    logger = host["metric_logger_instance"]
    logger.buffer_and_write_metrics = _spanned(mon, "log", logger.buffer_and_write_metrics)


def install(mon: Monitor) -> Callable[[], None]:
    """Put ``mon`` into MaxText's training loop; returns what undoes it."""
    # lazy: MaxText is imported only for a MaxText run
    from maxtext.common import checkpointing
    from maxtext.trainers.pre_train import train

    iteration, save = train.training_loop_iteration, checkpointing.save_checkpoint

    @functools.wraps(iteration)
    def training_loop_iteration(device: dict[str, Any], host: dict[str, Any],
                                immutable: dict[str, Any]) -> Any:
        _wrap_iteration(mon, device, host)
        return iteration(device, host, immutable)

    train.training_loop_iteration = training_loop_iteration
    checkpointing.save_checkpoint = _spanned(mon, "checkpoint", save)

    def undo() -> None:
        train.training_loop_iteration = iteration
        checkpointing.save_checkpoint = save

    return undo


def run(save: str, maxtext_args: Sequence[str], force: bool = False,
        tensorboard_dir: str | None = None) -> None:
    """MaxText's train with ``maxtext_args`` (its config file and overrides), measured by a
    Monitor whose record goes to ``save`` (and its per-step scalars to ``tensorboard_dir``:
    MaxText's own ``<base_output_directory>/<run_name>/tensorboard`` puts them beside its
    scalars)."""
    from absl import app
    from maxtext.trainers.pre_train import train

    mon = Monitor(config={"workload": "maxtext", "maxtext_args": list(maxtext_args)},
                  loss=maxtext_loss, save_to=save, force=force,
                  tensorboard_dir=tensorboard_dir)
    undo = install(mon)
    try:
        app.run(train.main, argv=["train", *maxtext_args])
    except SystemExit as e:  # absl's app.run ends with sys.exit
        if e.code not in (None, 0):
            raise
    finally:
        undo()
    mon.save(save, force=True)  # the run's own file, kept while it ran: finished now


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m pipecheck.monitor.maxtext",
        description="MaxText's train (same arguments) with a pipecheck.Monitor in its loop.")
    p.add_argument("--save", required=True, metavar="RUN.json",
                   help="the Monitor's record (kind monitor), kept while the run goes")
    p.add_argument("--force", action="store_true", help="overwrite RUN.json if it exists")
    p.add_argument("--tensorboard-dir", metavar="DIR",
                   help="also write each step's time, data wait, sync wait and dispatch as "
                        "TensorBoard scalars in DIR (pip install 'pipecheck[tensorboard]')")
    p.add_argument("maxtext_args", nargs=argparse.REMAINDER,
                   help="MaxText's config file and key=value overrides, as its train takes them")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not a.maxtext_args:
        p.error("give MaxText's config file (and overrides), as to its train")
    run(a.save, a.maxtext_args, a.force, a.tensorboard_dir)


if __name__ == "__main__":
    main()
