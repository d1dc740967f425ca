"""The commands never ask which workload they have: what a framework (MaxText) does its own
way is held by its workload kind (``workloads.WorkloadKind``) and applied by the core, so no
module of pipecheck/cli/ compares a ``workload`` with anything or imports MaxText's
modules. Read from the source (ast), nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pipecheck

CLI = Path(pipecheck.__file__).parent / "cli"
FRAMEWORK_MODULES = ("pipecheck.workloads.maxtext", "pipecheck.workloads.maxtext_model")
"""The framework's own modules: only the registry (pipecheck/workloads) imports them."""


def names_workload(node: ast.AST) -> bool:
    """``workload``, ``cfg.workload``, ``config.workload`` ... (a name or an attribute)."""
    return (isinstance(node, ast.Name) and node.id == "workload") or \
        (isinstance(node, ast.Attribute) and node.attr == "workload")


def workload_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing a workload (==, !=, in, not in, is) with anything."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(names_workload(side) for side in (node.left, *node.comparators))]


def framework_imports(tree: ast.AST) -> list[int]:
    """Lines importing a framework's module, as ``import ...`` or ``from ... import ...``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        if any(name.startswith(FRAMEWORK_MODULES) for name in named):
            lines.append(node.lineno)
    return lines


MODULES = sorted(CLI.glob("*.py"))


def test_the_cli_package_is_read():
    assert {p.name for p in MODULES} >= {"compare.py", "dataloader.py", "options.py"}


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_no_command_asks_which_workload_it_has(path):
    tree = ast.parse(path.read_text(), str(path))
    assert workload_comparisons(tree) == [], f"{path.name} compares a workload"
    assert framework_imports(tree) == [], f"{path.name} imports a framework's module"


@pytest.mark.parametrize("source, comparisons, imports", [
    ("if cfg.workload == maxtext.NAME: pass", [1], []),
    ("x = 'maxtext' != config.workload", [1], []),
    ("from pipecheck.workloads import maxtext", [], [1]),
    ("from pipecheck.workloads import kind_of, maxtext_model", [], [1]),
    ("import pipecheck.workloads.maxtext as mx", [], [1]),
    ("from pipecheck.workloads.maxtext import NAME", [], [1]),
    ("from pipecheck.workloads import kind_of\nkind_of(cfg.workload).setting_text(s)", [], []),
])
def test_the_scan_finds_what_it_looks_for(source, comparisons, imports):
    tree = ast.parse(source)
    assert (workload_comparisons(tree), framework_imports(tree)) == (comparisons, imports)
