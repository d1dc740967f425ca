"""The errors a user can get wrong: ``PipecheckError`` and its children, each with its exit
code.

``pipecheck.cli.main`` turns them into a one-line message and that exit code; library code
raises them and never prints.
"""

from __future__ import annotations


class PipecheckError(Exception):
    """Base class: a problem the user can fix. ``str(err)`` is the whole message."""

    exit_code = 1
    details: str | None = None
    """The full stack of the exception behind this error, when it was made from one; the
    CLI prints it with --traceback (kept as text so no frame, and no batch, stays alive)."""
    exit_at_once = False
    """True when the CLI must leave with ``os._exit`` after reporting it (see
    PipelineStallError)."""


class ConfigError(PipecheckError):
    """Unknown config key, bad value, unreadable config file, missing entry point."""

    exit_code = 2


class ResultFormatError(PipecheckError):
    """A results file that is not a pipecheck record, or of an unknown format_version."""

    exit_code = 2


class LogFormatError(ResultFormatError):
    """A file that cannot be read as a MaxText training log (unreadable, no step lines)."""


class OutputExistsError(PipecheckError):
    """Refusing to overwrite an existing output file without --force."""

    exit_code = 2


class OutputPathError(PipecheckError):
    """An output path that cannot be written: a missing directory, a file where a directory
    should be, a directory where the file should be, no permission."""

    exit_code = 2


class DataError(PipecheckError):
    """A missing, incomplete or corrupt data set / data directory."""

    exit_code = 3


class PipelineError(PipecheckError):
    """The input pipeline failed: a worker raised, or it stopped producing (timeout)."""

    exit_code = 4


class PipelineExhaustedError(PipelineError):
    """The input pipeline ran out of batches before the setting's batches were timed."""


class UserCodeError(PipecheckError):
    """An exception raised by the user's own code: an entry point (init, batch, dataset),
    the train step, or the dataset's transforms (also inside Grain's worker processes)."""

    exit_code = 5


class PipelineStallError(PipelineError):
    """The pipeline produced no batch within the timeout.

    A transform stuck in a read thread cannot be stopped from Python, and the interpreter
    joins those threads at exit: a command line tool should exit at once (``os._exit``)
    after reporting this error. Worker processes are already stopped when it is raised."""

    exit_at_once = True


class DistributedError(PipecheckError):
    """A multi-process run failed: a peer never joined, died, or ran another config."""

    exit_code = 6


class MonitorError(PipecheckError):
    """The Monitor was used in a way it cannot measure (no loss found, no steps, ...)."""

    exit_code = 2


class CaptureError(PipecheckError):
    """A profiler capture pipecheck cannot read or analyze: no capture in a folder, a file
    that is not one, no steps or no device activity in it."""

    exit_code = 2


class PlotUnavailableError(PipecheckError):
    """matplotlib (the ``plot`` extra) is not installed."""

    exit_code = 1


def one_line(what: BaseException | str, limit: int | None = None) -> str:
    """A message (or an exception's) on one line, whitespace folded, cut at ``limit``."""
    text = " ".join(str(what).split())
    return text if limit is None else text[:limit]
