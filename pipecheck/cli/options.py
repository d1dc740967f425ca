"""Options and the output tail shared by the commands: config, outputs, lists of counts."""

from __future__ import annotations

import math
import os
import re
from typing import Callable, Mapping, Sequence, TypeVar

import click
from click.core import ParameterSource

from pipecheck import config as config_mod
from pipecheck.encoding import ParallelEncoder
from pipecheck.records import store
from pipecheck.records.base import Record
from pipecheck.records.codec import ArrayEncoder
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.report.page import write_page
from pipecheck.tuned_config import config_text, machine_warning
from pipecheck.workloads import kind_of, resolve

F = TypeVar("F", bound=Callable[..., object])
"""A click command function (the option decorators return it as given)."""


def config_options(f: F) -> F:
    """--config PATH and repeated --set key=value."""
    f = click.option(
        "--set", "overrides", metavar="KEY=VALUE", multiple=True,
        help="Override one config key, e.g. --set compute_ms=60 (repeatable). Keys are flat "
             "and named exactly as in docs/config.md.",
    )(f)
    f = click.option(
        "--config", "config_path", type=click.Path(exists=True, dir_okay=False),
        help="YAML config selecting a workload and its keys (e.g. configs/calibrated.yml). "
             "Default: the built-in demo workload.",
    )(f)
    return f


HTML_KEY = "pipecheck_html_path"
"""Where ``--html`` is kept in the click context (read by ``check_outputs`` and
``save_json``, so no command needs its own parameter for it)."""


def _remember_html(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    ctx.meta[HTML_KEY] = value


def _html_path() -> str | None:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(HTML_KEY)
def quiet_option(f: F) -> F:
    """--quiet: no progress on stderr (a long command otherwise says what it is doing)."""
    return click.option("--quiet", is_flag=True,
                        help="No progress on stderr (lines, and bars on a terminal).")(f)


def output_options(f: F) -> F:
    """--json PATH, --html PATH and --force."""
    f = click.option("--html", type=click.Path(dir_okay=False), expose_value=False,
                     callback=_remember_html,
                     help="Write the run's self-contained HTML page to this file at the "
                          "end (as 'pipecheck report' does; see docs/report.md).")(f)
    f = click.option("--force", is_flag=True,
                     help="Overwrite the --json (and --trace, --html) output files if they "
                          "exist.")(f)
    f = click.option("--json", "json_path", type=click.Path(dir_okay=False),
                     help="Write the versioned result record to this JSON file (atomically).")(f)
    return f


def check_outputs(force: bool, *paths: str | None) -> None:
    """Before any measurement: every output path can be written, and no two are the same."""
    paths = (*paths, _html_path())
    for path in paths:
        store.check_writable(path, force)
    given = [os.path.abspath(p) for p in paths if p]
    if len(set(given)) != len(given):
        raise click.UsageError("two output options (--json, --trace, --save-config, --html) "
                               "name the same file; give them different paths")


def save_json(record: Record, json_path: str | None, force: bool,
              encoder: ArrayEncoder | None = None) -> None:
    """Write the record when --json was given (its large arrays compressed on threads, by
    ``encoder`` if the command gave it some ahead), its page when --html was, and say so."""
    if json_path:
        store.save(record, json_path, force, encoder or ParallelEncoder())
        click.echo(f"\nwrote {json_path}")
    html_path = _html_path()
    if html_path:
        write_page([(os.path.basename(json_path or html_path), record)], html_path, force)
        click.echo(f"wrote {html_path}")


def wrote_trace(trace_path: str) -> None:
    click.echo(f"wrote {trace_path} (open in ui.perfetto.dev)")


def given_options() -> dict[str, bool]:
    """Whether the command line gave each option of the running command (False: it has
    its default)."""
    ctx = click.get_current_context()
    return {name: ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT,
                                                         ParameterSource.DEFAULT_MAP)
            for name in ctx.params}


MAXTEXT_KEY = "pipecheck_maxtext"
"""Where ``--maxtext CONFIG.yml`` and the MaxText overrides after it are kept in the click
context (read by ``load_config``, so no command needs parameters of its own for them)."""

MAXTEXT_WORKLOAD = "maxtext"
"""The workload ``--maxtext`` configures: its kind reads the file and the overrides
(``WorkloadKind.own_config``)."""


def _remember_maxtext(ctx: click.Context, param: click.Parameter, value: object) -> None:
    ctx.meta.setdefault(MAXTEXT_KEY, {})[param.name] = value


def maxtext_options(f: F) -> F:
    """--maxtext CONFIG.yml [key=value ...]: MaxText's config file and overrides, exactly as
    MaxText's train takes them (see docs/maxtext.md)."""
    f = click.argument("maxtext_overrides", nargs=-1, expose_value=False,
                       callback=_remember_maxtext, metavar="[MAXTEXT_KEY=VALUE]...")(f)
    f = click.option("--maxtext", "maxtext_config", type=click.Path(dir_okay=False),
                     expose_value=False, callback=_remember_maxtext, metavar="CONFIG.yml",
                     help="Measure MaxText's own model, train step and Grain pipeline: its "
                          "config file, then its key=value overrides as arguments (run "
                          "pipecheck in MaxText's environment; see docs/maxtext.md).")(f)
    return f


def _maxtext_values(config_path: str | None) -> tuple[Mapping[str, str], str] | None:
    """The MaxText workload's values from --maxtext and its overrides, and the file (None:
    not given)."""
    ctx = click.get_current_context(silent=True)
    given = {} if ctx is None else ctx.meta.get(MAXTEXT_KEY, {})
    path, extra = given.get("maxtext_config"), tuple(given.get("maxtext_overrides") or ())
    if path is None:
        if extra:
            raise click.UsageError(f"unexpected argument {extra[0]!r}: key=value arguments "
                                   "are MaxText overrides; give them after --maxtext CONFIG.yml")
        return None
    if config_path:
        raise click.UsageError("--maxtext and --config are two configs; give one")
    if not os.path.isfile(path):
        raise click.BadParameter(f"MaxText config file {path} does not exist",
                                 param_hint="'--maxtext'")
    own_config = kind_of(MAXTEXT_WORKLOAD).own_config
    assert own_config is not None  # the registry's MaxText kind reads its own config
    return own_config(path, extra), path


def load_config(config_path: str | None, overrides: Sequence[str]) -> config_mod.RunConfig:
    """The resolved config; a config saved on another machine (``measured_on``) warns."""
    mx = _maxtext_values(config_path)
    if mx is not None:
        values, path = mx
        return resolve(values, overrides, source=path)
    file_values = config_mod.read_config_file(config_path) if config_path else None
    cfg = resolve(file_values, overrides, source=config_path or "defaults")
    if cfg.measured_on and config_path:
        warning = machine_warning(cfg.measured_on, config_path)
        if warning:
            click.echo(f"pipecheck: warning: {warning}", err=True)
    return cfg


def int_list(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    """Parse ``0,1,2,4`` into distinct non-negative ints, in order."""
    out: list[int] = []
    for item in value.split(","):
        item = item.strip()
        if not item.isdigit():
            raise click.BadParameter(
                f"expected a number or a comma-separated list like 0,1,2,4, got {value!r}")
        if int(item) not in out:
            out.append(int(item))
    return out


DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
"""The units a duration on the command line may carry (``500us``, ``30ms``, ``0.03s``)."""


def parse_duration(text: str) -> float:
    """Seconds of a duration written as a number of 0 or more and its unit (``30ms``,
    ``0.03s``, ``2.5ms``, ``500us``; a space between them allowed); ValueError saying how
    to write it otherwise."""
    found = re.fullmatch(r"\s*([^\s]+?)\s*(us|ms|s)\s*", text.lower())
    try:
        value = float(found.group(1)) if found else math.nan
    except ValueError:
        value = math.nan
    if found is None or not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: write a number of 0 or more and its "
                         "unit, e.g. 30ms, 0.03s, 2.5ms or 500us")
    return value * DURATION_UNITS[found.group(2)]


class Duration(click.ParamType):
    """A duration with its unit (``30ms``, ``0.03s``), in seconds; BadParameter (exit 2)
    saying how to write it otherwise."""

    name = "DURATION"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


def optional_int_list(ctx: click.Context, param: click.Parameter,
                      value: str | None) -> list[int] | None:
    """``int_list`` for an option whose absence means "take it from the config"."""
    return None if value is None else int_list(ctx, param, value)


def save_settings(path: str, config: config_mod.RunConfig, settings: GrainSettings,
                  measured: Mapping[str, object], force: bool) -> None:
    """--save-config: the chosen Grain settings as the workload's kind writes a config
    (pipecheck's YAML; for MaxText a MaxText config file, its base_config the user's and the
    Grain keys set, that MaxText's command line takes), atomically."""
    own_way = kind_of(config.workload).saved_config_text
    store.write_text_atomic(path, (own_way or config_text)(config, settings, measured), force)
