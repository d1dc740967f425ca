"""The whatif report: the predicted loader time and step for one setting, what binds, how
sure, the host's size, and the model behind it."""

from __future__ import annotations

from pipecheck.records.whatif import Interval, WhatIfResult
from pipecheck.units import ms, short_path


def _interval(i: Interval) -> str:
    return f"{ms(i.value)} ({ms(i.low)} .. {ms(i.high)})"


def _rate(i: Interval) -> str:
    return f"{1.0 / i.value:.1f}/s" if i.value > 0 else "-"


def _host_lines(r: WhatIfResult) -> list[str]:
    if r.target_s is None:
        return ["host sizing: needs T (compute alone): run pipecheck compare"]
    setting = r.setting.grain().short_label()
    lines = []
    if r.cores_needed is None:
        lines.append(f"host sizing: at {setting} no number of cores keeps up with T: "
                     f"{r.loader_binding} binds")
    else:
        lines.append(f"host sizing: at {setting} the loader keeps up with T "
                     f"({ms(r.target_s.value)}) from {r.cores_needed} "
                     f"core{'s' if r.cores_needed > 1 else ''}")
    if r.host_keeps_up and r.host_setting is not None:
        lines.append(f"on this host ({r.model.cores} cores) the cheapest setting predicted "
                     f"to keep up: {r.host_setting.label()}")
    elif r.host_keeps_up is False:
        lines.append(f"on this host ({r.model.cores} cores) no setting is predicted to keep "
                     "up with T")
    return lines


def format_whatif(r: WhatIfResult) -> str:
    """The report of one prediction."""
    m = r.model
    slower = f", every read {ms(r.read_latency_s)} slower" \
        if r.read_latency_s is not None else ""
    lines = [f"pipecheck whatif: {r.setting.label()}{slower} "
             f"(model fitted to {m.settings_fitted} settings of {short_path(r.source)}, "
             f"a {r.source_kind} record)", ""]
    lines.append(f"predicted loader time D: {_interval(r.predicted_loader_s)} per batch, "
                 f"{_rate(r.predicted_loader_s)}; binds: {r.loader_binding}")
    if r.predicted_step_s is not None and r.target_s is not None:
        f = f", x{r.interference:.2f} measured interference" if r.interference else ""
        lines.append(f"predicted step R:        {_interval(r.predicted_step_s)}, "
                     f"{_rate(r.predicted_step_s)}; binds: {r.binding} "
                     f"(T = {ms(r.target_s.value)}{f})")
    else:
        lines.append("predicted step R: a dataloader record holds no T (compute alone); the "
                     "step is at least D (pipecheck compare measures T)")
    if r.precomputed_loader_s is not None and r.stage_s is not None:
        lines.append(f"if {r.model.stage} were precomputed (its {ms(r.stage_s)} per batch "
                     f"gone): D = {_interval(r.precomputed_loader_s)}; binds: "
                     f"{r.precomputed_binding}")
    lines.append(f"how sure: the model misses the measured settings by "
                 f"{100 * m.fit_error:.0f}% in the median (each left out in turn), their D "
                 f"intervals are +-{100 * m.noise:.0f}%")
    lines += [""] + _host_lines(r)
    lines += ["", f"model: {ms(m.worker_cpu_s)} CPU + {ms(m.latency_s)} waiting per batch in "
              f"{m.stage}; training process {ms(m.main_s)} per batch with workers, "
              f"{ms(m.main_alone_s)} without; measured on {m.cores} cores "
              "(docs/whatif.md)"]
    lines += [f"note: {n}" for n in r.notes]
    return "\n".join(lines) + "\n"
