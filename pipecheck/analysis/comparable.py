"""Can ``diff`` judge B against A? Pure: named rules over two run summaries.

Each rule compares one thing that, when it differs between the runs (and is not the change
the user meant to test), makes a step-time difference unattributable: the batch size, the
model, the devices, the versions of JAX and pipecheck, the loader setting, the machine's
load from other programs, and enough steady steps. A rule that fires gives a
``NotComparable``: both values and what to do. ``--allow RULE`` (or ``--allow KEY`` for a
config key) declares a difference to be the change under test; steady steps cannot be
allowed.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from pipecheck.errors import ConfigError
from pipecheck.records.diff import NotComparable, RunSummary
from pipecheck.records.env import differences

BATCH_KEYS = ("batch_size", "global_batch_size", "per_device_batch_size")
"""Config keys holding the batch size (pipecheck's and MaxText's)."""

MODEL_KEYS = ("workload", "model", "model_name")
"""Config keys naming what is trained."""

LOADER_KEYS = ("num_workers", "per_worker_buffer_size", "num_threads", "prefetch_buffer_size",
               "grain_worker_count")
"""Config keys of the loader setting (Grain's knobs)."""

RUN_NAME_KEYS = ("run_name", "metrics_file")
"""Config keys naming the run or where it writes, not what it computes: two runs of the same
config differ in them (MaxText derives its ``*_dir`` keys from ``run_name``)."""

PATH_KEY_SUFFIXES = ("_dir", "_directory")
"""Config keys ending so name a folder a run writes to (``checkpoint_dir``,
``base_output_directory``, ``tensorboard_dir``): never a reason two runs differ in speed."""

DEVICE_KEYS = ("device_kind", "device_count")
"""Environment keys of the devices the steps ran on."""

SOFTWARE_KEYS = ("jax", "jaxlib", "pipecheck")
"""Environment keys of the versions the ``versions`` rule compares (``analysis.diff``'s
``VERSION_KEYS`` are the rows its versions table shows, devices included)."""

MIN_STEADY_STEPS = 10
"""Fewer steady steps than this in either run and the diff cannot judge: the block bootstrap
of the median needs several blocks, and 10 steps give a median whose interval is ~as wide
as the changes users ask about (measured: benchmarks/diff_power.py)."""

LOAD_DIFF_MIN_CORES = 0.1
"""Other programs using at least a tenth of a core more during one run than the other: the
least a run's load reading resolves (over a phase of at least
``machine_load.MIN_PHASE_WALL_S`` the kernel's CPU accounting is good to ~0.05 of a core),
with a margin. On the shared 2-core machine, A/A pairs whose runs differed by 0.1-0.4 of a
core gave 42% false verdicts (benchmarks/diff_power.py): a step that uses every core slows
by far more than the load's share when another program takes a slice of it."""

LOAD_DIFF_SHARE_OF_HOST = 0.05
"""...and at least 5% of the host's cores: a step that uses all N cores loses about the
share other programs take, so 5% of them is the load that slows it by ``MIN_CHANGE`` (5%),
the smallest change a single-run diff judges (on a 64-core host, 3.2 cores)."""

STEPS_OPTION_KINDS = ("synthetic", "compare")
"""Record kinds whose command takes ``--steps`` (a Monitor run's steps are the user's loop;
a MaxText log's are its ``steps=`` key)."""

RULES = ("batch", "model", "config", "devices", "versions", "loader", "machine-load",
         "steady-steps")
"""Every rule's name, in the order reasons are listed."""

ALLOWABLE_RULES = tuple(r for r in RULES if r != "steady-steps")
"""The rules ``--allow`` takes: too few steady steps is never the change under test."""


def _show(v: object) -> str:
    return "absent" if v is None else str(v)


def _keyed(rule: str, what: str, keys: Sequence[str], a: Mapping[str, object],
           b: Mapping[str, object], allow: frozenset[str]) -> list[NotComparable]:
    """A reason for each of ``keys`` (not allowed) whose values both runs hold and differ."""
    held = [k for k in keys if k not in allow and a.get(k) is not None and b.get(k) is not None]
    return [NotComparable(
        rule, f"{what} {k}", _show(va), _show(vb),
        f"rerun B with {k}={_show(va)}, or pass --allow {rule} if this is the change you "
        "are testing") for k, va, vb in differences(a, b, held)]


def _config_rule(a: RunSummary, b: RunSummary, allow: frozenset[str],
                 free: int = 1) -> list[NotComparable]:
    """Other config keys: ``free`` of them may differ (the change under test); more,
    unallowed, leave the difference unattributable."""
    named = set(BATCH_KEYS + MODEL_KEYS + LOADER_KEYS + RUN_NAME_KEYS)
    keys = sorted(k for k in set(a.config) & set(b.config)
                  if k not in named and not k.endswith(PATH_KEY_SUFFIXES)
                  and k not in allow and a.config[k] != b.config[k])
    if len(keys) <= free:
        return []
    shown = ", ".join(f"{k} {_show(a.config[k])} vs {_show(b.config[k])}" for k in keys)
    return [NotComparable(
        "config", "config keys", "; ".join(f"{k}={_show(a.config[k])}" for k in keys),
        "; ".join(f"{k}={_show(b.config[k])}" for k in keys),
        f"{len(keys)} config keys differ ({shown}): change one at a time, or pass "
        f"--allow KEY for each one that is part of the change")]


def _load_rule(a: RunSummary, b: RunSummary, allow: frozenset[str]) -> list[NotComparable]:
    la, lb = a.other_cores, b.other_cores
    if la is None or lb is None:
        return []
    cores = max(a.host_cores or 1, b.host_cores or 1)
    if abs(la - lb) < max(LOAD_DIFF_MIN_CORES, LOAD_DIFF_SHARE_OF_HOST * cores):
        return []
    busier = "A" if la > lb else "B"
    return [NotComparable(
        "machine-load", f"other programs' load (cores of {cores})", f"{la:.2f}", f"{lb:.2f}",
        f"{busier} ran on a busier machine: rerun {busier} when the machine is quiet, or "
        "pass --allow machine-load")]


def _steps_rule(a: RunSummary, b: RunSummary, allow: frozenset[str]) -> list[NotComparable]:
    na, nb = a.step_time.summary.n, b.step_time.summary.n
    if min(na, nb) >= MIN_STEADY_STEPS:
        return []
    short = a if na <= nb else b
    more = 2 * MIN_STEADY_STEPS + 10
    who = "A and B have" if na == nb else f"{'A' if short is a else 'B'} has"
    how = (f"train it with steps={more} or more (MaxText's key)" if short.kind == "imported"
           else f"rerun it with --steps {more}" if short.kind in STEPS_OPTION_KINDS
           else f"let it run {more} steps or more")
    return [NotComparable(
        "steady-steps", "steady-state steps", str(na), str(nb),
        f"each run needs at least {MIN_STEADY_STEPS} steady steps; "
        f"{who} {min(na, nb)}: {how}")]


def _env_rules(a: RunSummary, b: RunSummary, allow: frozenset[str]) -> list[NotComparable]:
    return (_keyed("devices", "device", DEVICE_KEYS, a.env, b.env, allow)
            + _keyed("versions", "version of", SOFTWARE_KEYS, a.env, b.env, allow))


def _config_rules(a: RunSummary, b: RunSummary, allow: frozenset[str],
                  free: int = 1) -> list[NotComparable]:
    return (_keyed("batch", "batch size", BATCH_KEYS, a.config, b.config, allow)
            + _keyed("model", "model", MODEL_KEYS, a.config, b.config, allow)
            + _config_rule(a, b, allow, free))


def _loader_rule(a: RunSummary, b: RunSummary, allow: frozenset[str]) -> list[NotComparable]:
    return _keyed("loader", "loader setting", LOADER_KEYS, a.config, b.config, allow)


CHECKS: tuple[Callable[[RunSummary, RunSummary, frozenset[str]], list[NotComparable]], ...] = (
    _config_rules, _env_rules, _loader_rule, _load_rule, _steps_rule,
)
"""Every rule's check, in ``RULES`` order."""

SIDE_CHECKS = (_env_rules, _loader_rule, _load_rule)
"""The checks ``within_side`` runs beside the config rules (with no config key free): the
steady steps of a side's runs are checked apart, its first run's against the other side's."""


def not_comparable(a: RunSummary, b: RunSummary,
                   allow: Sequence[str] = ()) -> tuple[NotComparable, ...]:
    """Every reason B cannot be judged against A, in ``RULES`` order; empty when it can.
    ``allow``: rule names (``ALLOWABLE_RULES``) or config keys whose difference is the
    change under test."""
    allowed = frozenset(allow)
    found = [r for check in CHECKS for r in check(a, b, allowed)
             if r.rule not in allowed or r.rule not in ALLOWABLE_RULES]
    return tuple(sorted(found, key=lambda r: RULES.index(r.rule)))


SIDE_ALLOWABLE_RULES = ("machine-load",)
"""The rules ``--allow`` also relaxes among the runs of one side: the machine's load, which
the user may accept varying from run to run. The others allowed name the change from A to
B; the runs of one side are repeats and may differ in none of them."""


def _within(r: NotComparable, side: str, i: int, runs: Sequence[RunSummary]) -> NotComparable:
    """A reason between a side's first run and its ``i``-th (1-based) as that side's."""
    first, run = runs[0], runs[i - 1]
    fix = (f"{side}'s runs must be repeats of one setup: rerun {run.source} as "
           f"{first.source}, or take it out of {side}")
    if r.rule == "machine-load":
        busier = "its first run" if float(r.a) > float(r.b) else f"run {i}"
        fix = (f"the machine was busier during {busier}; " + fix
               + ", or pass --allow machine-load")
    return NotComparable(r.rule, f"{side}'s run {i} of {len(runs)} ({run.source}) against "
                         f"its first: {r.what}", r.a, r.b, fix)


def within_side(runs: Sequence[RunSummary], side: str,
                allow: Sequence[str] = ()) -> tuple[NotComparable, ...]:
    """Every reason the runs of one side (``side``: "A" or "B") are not repeats of its first
    run: the rules of ``not_comparable`` (only ``SIDE_ALLOWABLE_RULES`` allowed), every
    config key that differs, and each run with too few steady steps."""
    allowed = frozenset(r for r in allow if r in SIDE_ALLOWABLE_RULES)
    out: list[NotComparable] = []
    for i, run in enumerate(runs[1:], start=2):
        found = [r for check in SIDE_CHECKS for r in check(runs[0], run, allowed)
                 if r.rule not in allowed]
        found += _config_rules(runs[0], run, allowed, free=0)
        out += [_within(r, side, i, runs)
                for r in sorted(found, key=lambda r: RULES.index(r.rule))]
    for i, run in enumerate(runs[1:], start=2):  # the first's: A's first against B's
        n = run.step_time.summary.n
        if n < MIN_STEADY_STEPS:
            out.append(NotComparable(
                "steady-steps", f"{side}'s run {i} of {len(runs)} ({run.source}): "
                "steady-state steps", str(n), f"at least {MIN_STEADY_STEPS}",
                f"each run needs at least {MIN_STEADY_STEPS} steady steps: rerun it with "
                f"{2 * MIN_STEADY_STEPS + 10} steps or more, or take it out of {side}"))
    return tuple(out)


KEYED_RULES: tuple[tuple[str, str, str, Sequence[str]], ...] = (
    ("batch", "config", "batch size", BATCH_KEYS), ("model", "config", "model", MODEL_KEYS),
    ("devices", "env", "device kind or count", DEVICE_KEYS),
    ("versions", "env", "JAX or pipecheck version", SOFTWARE_KEYS))
"""The rules that compare named keys of the runs' config or environment (rule, where,
what, keys): a rule whose keys the two runs do not both hold cannot be checked."""


def unchecked(a: RunSummary, b: RunSummary, allow: Sequence[str] = ()) -> tuple[str, ...]:
    """Each keyed rule (not allowed) that could not be checked, with the run(s) lacking its
    keys: ``"batch (A holds no batch size)"``. A log excerpt without MaxText's config lines,
    or a Monitor record, holds no config: whether the runs differ only by the change under
    test is then unknown, and the diff says so beside its verdict."""
    out = []
    for rule, where, what, keys in KEYED_RULES:
        ha, hb = (a.config, b.config) if where == "config" else (a.env, b.env)
        if rule in allow or any(ha.get(k) is not None and hb.get(k) is not None
                                for k in keys):
            continue
        missing = [side for side, held in (("A", ha), ("B", hb))
                   if all(held.get(k) is None for k in keys)]
        if missing:
            verb = "holds" if len(missing) == 1 else "hold"
            out.append(f"{rule} ({' and '.join(missing)} {verb} no {what})")
        else:
            out.append(f"{rule} (A and B name their {what} by different keys)")
    return tuple(out)


def side_unchecked(runs: Sequence[RunSummary], side: str,
                   allow: Sequence[str] = ()) -> tuple[str, ...]:
    """Each keyed rule (not allowed) that could not be checked between the runs of one side
    (``side``: "A" or "B"), naming the runs that lack its keys: ``"batch (within A: runs 2
    and 3 hold no batch size)"``; empty for one run. Repeats of one setup are what the test
    over the runs assumes; a folder of logs without config lines cannot show it."""
    if len(runs) < 2:
        return ()
    out = []
    for rule, where, what, keys in KEYED_RULES:
        if rule in allow:
            continue
        held = [r.config if where == "config" else r.env for r in runs]
        lacking = [i for i, h in enumerate(held, start=1) if all(h.get(k) is None for k in keys)]
        if lacking:
            named = (f"run {lacking[0]} holds" if len(lacking) == 1 else
                     f"runs {', '.join(map(str, lacking[:-1]))} and {lacking[-1]} hold")
            out.append(f"{rule} (within {side}: {named} no {what})")
        elif any(not any(held[0].get(k) is not None and h.get(k) is not None for k in keys)
                 for h in held[1:]):
            out.append(f"{rule} (within {side}: its runs name their {what} by different keys)")
    return tuple(out)


def unchecked_line(items: Sequence[str]) -> str:
    """The line beside the verdict naming what could not be checked ("" when all was)."""
    if not items:
        return ""
    return ("comparability not checked for " + "; ".join(items) + ": diff cannot tell "
            "whether the runs differ there; a pipecheck record or a whole MaxText log (its "
            "config lines) holds them, or pass --allow RULE if you know they match")


def check_allow(allow: Sequence[str], a: RunSummary, b: RunSummary) -> None:
    """A ConfigError for an ``--allow`` that is neither a rule nor a config key of A or B."""
    keys = set(a.config) | set(b.config)
    for name in allow:
        if name not in ALLOWABLE_RULES and name not in keys:
            raise ConfigError(f"--allow {name!r} is neither a rule ({', '.join(ALLOWABLE_RULES)}) "
                              "nor a config key of A or B")
