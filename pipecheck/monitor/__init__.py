"""``pipecheck.Monitor``: pipecheck's timing inside your own training loop.

::

    from pipecheck import Monitor

    mon = Monitor(config={"model": "my-lm", "batch_size": 32})
    for step, batch in enumerate(mon.batches(loader)):       # data_wait
        state, metrics = mon.step(train_step, state, batch)  # dispatch + lagged sync
        if step % 100 == 0:
            with mon.span("checkpoint"):
                save(state)
    mon.finish()
    mon.save("run.json")                                     # kind "monitor"

While the loop runs, a sync locator samples the loop's thread and finds the lines of the
user's code that force a host-device sync (``float(loss)`` of the current step, a metrics
callback, ``np.asarray(x)``); the record holds them with their cost, so
``pipecheck compare --real RUN.json`` can point at them. Garbage collections and
compilations of the step function are recorded too.

The record (``MonitorResult``) is the same kind of versioned JSON the commands write:
``steps`` (one StepRecord per step), the steady-state ``step_time``, ``sync_sites`` and a
``breakdown`` of the wall time. ``plot``, ``compare --real`` and ``diff`` read it.

With ``Monitor(save_to=PATH)`` the record is kept on disk while the loop runs
(``run_saver``): written every ``save_every_s`` seconds by a helper thread and at the end,
and, marked ``incomplete``, when an exception leaves the loop, on SIGTERM/SIGINT, or when
the process exits without ``finish``; see docs/monitor.md.

The package, one idea a module: ``loop`` (the Monitor: the loop API and its hot path),
``loss`` (the loss in a step's output), ``user_spans`` (``Monitor.span``), ``watchers``
(gc, compilations, the sync locator; the state captured from them), ``result`` (the pure
build of the record, its JSON), ``run_saver`` (the record kept on disk, the signals,
excepthook and exit chained), ``gather`` (a multi-process run: per-host files, the gather
to process 0).
"""

from pipecheck.monitor.loop import Monitor
from pipecheck.monitor.loss import default_loss

__all__ = ["Monitor", "default_loss"]
