"""Import shim: the shared ``run_cli``/``REPO`` from tests/conftest.py for test modules.

tests/ is not a package, so test modules cannot import conftest by a package path."""

from __future__ import annotations

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "pipecheck_tests_conftest", pathlib.Path(__file__).resolve().parents[1] / "conftest.py")
assert _spec is not None and _spec.loader is not None
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)

REPO = _conftest.REPO
run_cli = _conftest.run_cli
