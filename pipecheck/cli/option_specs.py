"""Options declared once: a command's table of ``OptionSpec`` gives its click options (in
the table's order, as ``--help`` lists them) and everything the command derives from them
(what a file given instead refuses, what every process of a multi-process run must agree
on), so that no option is named again in the command."""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import click

from pipecheck.cli.options import F


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One option: its flag, the name the command's value goes by, click's declaration."""

    flag: str
    name: str
    """The parameter's name (for compare, the ``CompareOptions`` field it sets)."""
    declaration: Mapping[str, object]
    """click.option's keywords: type, default, help, metavar, ..."""
    replaced_by: str | None = None
    """The option (its name) whose file replaces the measurement this option shapes: given
    together, the two are a usage error."""
    agreed: bool = False
    """Every process of a multi-process run must give the same value (checked when given)."""

    @property
    def key(self) -> str:
        """The option as a key of the values compared across processes (``--max-workers``:
        ``max_workers``; ``measure.distributed.fingerprint`` writes it back as the flag)."""
        return self.flag.removeprefix("--").replace("-", "_")


def declare(specs: Sequence[OptionSpec]) -> Callable[[F], F]:
    """The click options of ``specs``, listed by ``--help`` in the table's order."""

    def decorate(f: F) -> F:
        for spec in reversed(specs):
            f = click.option(spec.flag, spec.name, cls=click.Option, **spec.declaration)(f)
        return f

    return decorate


def refuse_replaced(specs: Sequence[OptionSpec], given: Mapping[str, bool],
                    values: Mapping[str, object]) -> None:
    """An option given for a measurement that a file replaces is a usage error, not ignored
    (``given``: whether the command line gave each option)."""
    files = {s.replaced_by for s in specs if s.replaced_by}
    ignored = [s.flag for s in specs if s.replaced_by and given[s.name] and values[s.replaced_by]]
    if ignored:
        named = ", ".join(s.flag for s in specs if s.name in files)
        raise click.UsageError(f"{', '.join(ignored)} cannot be used with the file that "
                               f"replaces that measurement ({named})")


def agreed_values(specs: Sequence[OptionSpec], given: Mapping[str, bool],
                  values: Mapping[str, object]) -> dict[str, object]:
    """What every process must agree on: each agreed option's value where the command line
    gave it, else None (its default, which every process has)."""
    return {s.key: values[s.name] if given[s.name] else None for s in specs if s.agreed}
