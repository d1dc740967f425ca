"""Options declared once: a command's table of ``OptionSpec`` gives its click options (in
the table's order, as ``--help`` lists them) and everything the command derives from them
(what a file given instead refuses, what every process of a multi-process run must agree
on), so that no option is named again in the command; and options renamed, their old spelling
still accepted (``RenamedOption``).

An option has one name across the commands (docs/config.md, "One name per option"):
``--steps`` counts the steps timed, the Grain knobs are spelled as Grain's own options
(``--per-worker-buffer-size``, ``--prefetch-buffer-size``). A renamed option still takes its
old spelling, says once on stderr what it is called now, and is left out of ``--help``."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import click
from click.core import ParameterSource

from pipecheck.cli.options import F


def notice(old: str, new: str) -> str:
    """The line said on stderr when a command line uses an option's old spelling."""
    return f"pipecheck: {old} is now {new}; the old spelling still works"


class RenamedOption(click.Option):
    """A click option that also accepts its old spellings (``old``), hidden from --help.

    The old spellings go to the parser as one more option of the same kind with a place of
    their own in the parsed values, so that the value read tells which spelling gave it:
    given the old one, the option says the notice and takes that value as given on the
    command line; given both, it is a usage error (which of the two was meant is not
    known)."""

    def __init__(self, *args: Any, old: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.is_flag or self.multiple:
            raise TypeError("RenamedOption takes options with one value (no flags, no "
                            "multiple)")
        self.old = tuple(old)

    def _old_dest(self, flag: str) -> str:
        return f"{self.name} (as {flag})"

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        # parser: click's option parser (its class is private, and renamed across 8.x)
        super().add_to_parser(parser, ctx)
        for flag in self.old:
            parser.add_option(obj=self, opts=[flag], dest=self._old_dest(flag),
                              action="store", nargs=self.nargs)

    def consume_value(self, ctx: click.Context,
                      opts: Mapping[str, Any]) -> tuple[Any, ParameterSource]:
        used = [flag for flag in self.old if self._old_dest(flag) in opts]
        if not used:
            return super().consume_value(ctx, opts)
        new = self.opts[0]
        if self.name in opts or len(used) > 1:
            raise click.UsageError(f"{used[0]} is the old spelling of {new}; give {new} once",
                                   ctx)
        click.echo(notice(used[0], new), err=True)
        return opts[self._old_dest(used[0])], ParameterSource.COMMANDLINE


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One option: its flag, the name the command's value goes by, click's declaration."""

    flag: str
    """Its spelling, as click declares it (``--x/--no-x`` for an on-off switch)."""
    name: str
    """The parameter's name (for compare, the ``CompareOptions`` field it sets)."""
    declaration: Mapping[str, object]
    """click.option's keywords: type, default, help, metavar, ..."""
    replaced_by: str | None = None
    """The option (its name) whose file replaces the measurement this option shapes: given
    together, the two are a usage error."""
    agreed: bool = False
    """Every process of a multi-process run must give the same value (checked when given)."""
    old: tuple[str, ...] = ()
    """Its old spellings: still accepted with a notice, not in --help (``RenamedOption``)."""

    @property
    def key(self) -> str:
        """The option as a key of the values compared across processes (``--max-workers``:
        ``max_workers``; ``measure.distributed.fingerprint`` writes it back as the flag)."""
        return self.switch.removeprefix("--").replace("-", "_")

    @property
    def switch(self) -> str:
        """The flag as messages name it: an on-off switch by its first spelling."""
        return self.flag.split("/")[0]

    def spelled(self, value: object) -> str:
        """The flag as the command line gave it: an on-off switch off by its second
        spelling."""
        on, _, off = self.flag.partition("/")
        return off if off and value is False else on


def declare(specs: Sequence[OptionSpec]) -> Callable[[F], F]:
    """The click options of ``specs``, listed by ``--help`` in the table's order."""

    def decorate(f: F) -> F:
        for spec in reversed(specs):
            old: dict[str, Any] = {"old": spec.old} if spec.old else {}
            f = click.option(spec.flag, spec.name, cls=RenamedOption if spec.old else click.Option,
                             **old, **spec.declaration)(f)
        return f

    return decorate


def refuse_replaced(specs: Sequence[OptionSpec], given: Mapping[str, bool],
                    values: Mapping[str, object]) -> None:
    """An option given for a measurement that a file replaces is a usage error, not ignored
    (``given``: whether the command line gave each option)."""
    files = {s.replaced_by for s in specs if s.replaced_by}
    ignored = [s.spelled(values[s.name]) for s in specs
               if s.replaced_by and given[s.name] and values[s.replaced_by]]
    if ignored:
        named = ", ".join(s.switch for s in specs if s.name in files)
        raise click.UsageError(f"{', '.join(ignored)} cannot be used with the file that "
                               f"replaces that measurement ({named})")


def agreed_values(specs: Sequence[OptionSpec], given: Mapping[str, bool],
                  values: Mapping[str, object]) -> dict[str, object]:
    """What every process must agree on: each agreed option's value where the command line
    gave it, else None (its default, which every process has)."""
    return {s.key: values[s.name] if given[s.name] else None for s in specs if s.agreed}
