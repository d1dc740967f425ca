"""Units as reports and messages print them: durations, p-values, rates, bytes, and file
paths shortened for display. Pure functions; nothing here prints."""

from __future__ import annotations

import math
import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
"""pipecheck's own package directory (its files are shown as ``pipecheck/...``)."""


LIBRARY_DIRS = ("site-packages", "dist-packages")
"""The directories installed packages live in (a venv's, the system's, the user's)."""


def library_file(path: str) -> str | None:
    """An installed package's file as its package names it (``flax/core/scope.py``), from
    wherever it is installed; None for a file of no installed package."""
    full = os.path.abspath(path) if not path.startswith("<") else path
    for marker in LIBRARY_DIRS:
        head, sep, tail = full.replace("\\", "/").partition(f"/{marker}/")
        if sep and tail:
            return tail
    return None


def library_module(path: str) -> str | None:
    """An installed package's file as a module (``flax.core.scope``); None as above."""
    file = library_file(path)
    if file is None:
        return None
    return file.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def short_path(path: str, cwd: str | None = None) -> str:
    """A file path as reports show it: pipecheck's own files as ``pipecheck/...``, an
    installed package's as its package names it (``flax/core/scope.py``, not the venv's
    path), files under the working directory relative to it, any other path unchanged.
    Records keep the absolute path; only what is printed is shortened."""
    if path.startswith("<"):
        return path
    full = os.path.abspath(path)
    if full.startswith(PACKAGE_DIR + os.sep):
        return "pipecheck/" + os.path.relpath(full, PACKAGE_DIR).replace(os.sep, "/")
    library = library_file(full)
    if library is not None:
        return library
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if full.startswith(base + os.sep):
        return os.path.relpath(full, base)
    return path


def short_location(location: str, cwd: str | None = None) -> str:
    """``path:line`` with the path shortened as by :func:`short_path`."""
    path, sep, line = location.rpartition(":")
    if not sep or not line.isdigit():
        return short_path(location, cwd) if os.path.isabs(location) else location
    return f"{short_path(path, cwd)}:{line}"


def ms(seconds: float | None, signed: bool = False) -> str:
    """A duration: from 1 s on in seconds (2 decimals), from 10 ms on in ms with 1 decimal,
    below with 2; ``signed`` for differences; '-' when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    sign = "+" if signed else ""
    if abs(seconds) >= 1.0:
        return f"{seconds:{sign}.2f} s"
    v = seconds * 1000.0
    return f"{v:{sign}.1f} ms" if abs(v) >= 10 else f"{v:{sign}.2f} ms"


def p_value(p: float | None) -> str:
    """A test's p-value: ``p<0.001``, ``p=0.042``, or ``p=?`` when there is none."""
    if p is None or not math.isfinite(p):
        return "p=?"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def rate(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M{unit}"
    if value >= 1e3:
        return f"{value / 1e3:.2f} k{unit}"
    return f"{value:.1f} {unit}"


def nbytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return str(n)
