"""tools/make_doc_examples.py, for the tests whose runs are the docs' timed examples: each
such test checks its own output against the skeleton of the example the docs show."""

from __future__ import annotations

import importlib.util
import sys
import types

from ..conftest import REPO


def _load() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_doc_examples", REPO / "tools" / "make_doc_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


make_doc_examples = _load()


def skeleton_problems(name: str, stdout: str) -> list[str]:
    """How ``stdout`` departs from the docs' example ``name`` (the command and its tables)."""
    problems: list[str] = make_doc_examples.skeleton_problems(name, stdout)
    return problems
