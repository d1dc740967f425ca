"""The package's shape, checked so it cannot regress: what `import pipecheck` and the CLI
import, where imports inside functions are allowed, and how long a function may be."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pipecheck

PACKAGE = pathlib.Path(pipecheck.__file__).parent
ROOT = PACKAGE.parent

HEAVY = ("jax", "jaxlib", "grain", "tensorflow", "tensorflow_datasets", "matplotlib", "flax",
         "optax")
"""Libraries whose import costs seconds (or pulls in JAX): `import pipecheck` and the CLI's
start-up must not import them."""

LAZY_LIBRARIES = (*HEAVY, "tqdm", "absl")
"""Libraries a function may import where it uses them: the heavy ones, tqdm (only when a
bar is drawn) and absl (Grain's flags, only when a pipeline runs)."""

LAZY_OWN_MODULES = {
    ("__init__.py", "pipecheck.measure.monitor"): "import pipecheck stays cheap",
    ("__init__.py", "pipecheck.tuned_config"): "import pipecheck stays cheap",
    ("data/sources.py", "pipecheck.data.demo_text"): "demo_text imports tfds",
}
"""pipecheck's own modules imported inside a function, and why."""

MAX_FUNCTION_LINES = 60
"""Longer functions are split, unless a ``# long: why`` comment just above says why not."""


def _modules() -> list[tuple[str, ast.Module, list[str]]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        out.append((path.relative_to(PACKAGE).as_posix(), ast.parse(text), text.splitlines()))
    return out


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    # `from pipecheck.data import demo_text` imports the module pipecheck.data.demo_text
    return [f"{base}.{a.name}" if base == "pipecheck.data" else base for a in node.names]


def test_import_pipecheck_and_the_cli_import_no_heavy_library() -> None:
    """`pipecheck --help` stays fast: nothing it imports pulls in JAX, Grain, tfds or
    matplotlib (checked in a fresh interpreter)."""
    code = (
        "import sys, pipecheck, pipecheck.cli\n"
        "pipecheck.Monitor, pipecheck.grain_options\n"
        "assert pipecheck.cli.main(['--help']) == 0\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_imports_inside_functions_have_an_import_cost_reason() -> None:
    """A function imports only a costly library (or a module that pulls one in), and its
    module says why in a ``# lazy:`` comment; everything else is imported at the top."""
    problems = []
    for name, tree, lines in _modules():
        found = False
        for fn in _functions(tree):
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                found = True
                for module in _imported(node):
                    if not (module.split(".")[0] in LAZY_LIBRARIES
                            or (name, module) in LAZY_OWN_MODULES):
                        problems.append(f"{name}:{node.lineno} imports {module} in "
                                        f"{fn.name}(); import it at module level")
        if found and not any("# lazy:" in line for line in lines):
            problems.append(f"{name} imports inside functions without a '# lazy:' reason")
    assert problems == []


def test_no_function_is_over_the_line_limit_without_a_reason() -> None:
    problems = []
    for name, tree, lines in _modules():
        for fn in _functions(tree):
            length = fn.end_lineno - fn.lineno + 1  # type: ignore[operator]
            if length <= MAX_FUNCTION_LINES:
                continue
            first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            if not lines[first - 2].strip().startswith("# long:"):
                problems.append(f"{name}:{fn.lineno} {fn.name}() is {length} lines")
    assert problems == []


def test_the_checks_see_what_they_check() -> None:
    """The checks above would fail on a long function and on a light lazy import."""
    tree = ast.parse("def f():\n    import os\n" + "    x = 1\n" * 70)
    fn = _functions(tree)[0]
    assert fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[operator]
    imports = [n for n in ast.walk(fn) if isinstance(n, ast.Import)]
    assert [m for n in imports for m in _imported(n)] == ["os"]
    assert "os" not in LAZY_LIBRARIES
