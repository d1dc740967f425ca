"""The package's shape, checked so it cannot regress: which part of pipecheck may import
which (the layers docs/architecture.md draws), what `import pipecheck` and the CLI import,
where imports inside functions are allowed, and how long a function may be."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

import pipecheck

PACKAGE = pathlib.Path(pipecheck.__file__).parent
ROOT = PACKAGE.parent

HEAVY = ("jax", "jaxlib", "grain", "tensorflow", "tensorflow_datasets", "matplotlib", "flax",
         "optax", "maxtext")
"""Libraries whose import costs seconds (or pulls in JAX): `import pipecheck` and the CLI's
start-up must not import them."""

LAZY_LIBRARIES = (*HEAVY, "tqdm", "absl", "xprof", "tensorboardX")
"""Libraries a function may import where it uses them: the heavy ones, tqdm (only when a
bar is drawn), absl (Grain's flags, only when a pipeline runs), xprof (an optional
extra, only for ``profile --xprof``) and tensorboardX (an optional extra, only for
``Monitor(tensorboard_dir=...)``)."""

LAZY_OWN_MODULES = {
    ("__init__.py", "pipecheck.monitor"): "import pipecheck stays cheap",
    ("__init__.py", "pipecheck.tuned_config"): "import pipecheck stays cheap",
    ("data/sources.py", "pipecheck.data.demo_text"): "demo_text imports tfds",
}
"""pipecheck's own modules imported inside a function, and why."""

ALLOWED_IMPORTS: dict[str, frozenset[str]] = {
    # The floor: pure building blocks.
    "errors": frozenset(),
    "progress": frozenset(),
    "units": frozenset(),
    "step_types": frozenset(),
    "host_cpus": frozenset(),
    # The mount table, read by measure/ (the page cache) and testing/ (the slow mount).
    "mounts": frozenset(),
    "stats": frozenset({"progress"}),
    "config": frozenset({"errors"}),
    "records": frozenset({"errors", "stats"}),
    # Where batches come from (sources, tokenizer, the Grain pipeline for a setting); the
    # user's entry points run with their errors as one line.
    "data": frozenset({"errors", "records", "step_types"}),
    "user_code": frozenset({"errors", "step_types", "units"}),
    # Tools for tests and benchmarks, shipped: a slow FUSE mount (remote storage simulated).
    "testing": frozenset({"errors", "mounts"}),
    # Pure functions of what was measured (files are opened in logs/).
    "analysis": frozenset({"errors", "progress", "records", "stats", "units"}),
    # A record's large arrays compressed on threads, ahead of a write and during it (the
    # records themselves hold no threads).
    "encoding": frozenset({"records"}),
    # Reading files for analysis: MaxText logs (plain or gzip), result files for diff,
    # jax.profiler captures (and XProf's reading of one).
    "logs": frozenset({"analysis", "errors", "host_cpus", "progress", "records"}),
    # Pure text renderers of records.
    "report": frozenset({"analysis", "errors", "progress", "records", "units"}),
    "tuned_config": frozenset({"config", "errors", "host_cpus", "records"}),
    "workloads": frozenset({"config", "data", "errors", "records", "step_types", "user_code"}),
    # What touches the clock or the machine.
    "measure": frozenset({"analysis", "config", "data", "errors", "host_cpus", "progress",
                          "mounts", "records", "stats", "step_types", "units", "user_code",
                          "workloads"}),
    # pipecheck.Monitor, in the user's own loop: measures with measure/, renders its own
    # report with report/.
    "monitor": frozenset({"analysis", "encoding", "errors", "measure", "records", "report",
                          "step_types"}),
    "compare": frozenset({"analysis", "config", "host_cpus", "measure", "progress", "records",
                          "tuned_config", "units", "workloads"}),
    # Orchestration of one `pipecheck profile` run (reading a capture, then analysis).
    "profiling": frozenset({"analysis", "errors", "logs", "progress", "records"}),
    "cli": frozenset({"analysis", "compare", "config", "encoding", "errors", "logs", "measure",
                      "profiling", "progress", "records", "report", "tuned_config", "workloads"}),
    # `import pipecheck` (Monitor and grain_options, both imported lazily) and `python -m`.
    "pipecheck": frozenset({"monitor", "tuned_config"}),
    "__main__": frozenset({"cli"}),
}
"""Which part of pipecheck (a sub-package, or a module at the top of the package;
``pipecheck``: the package's ``__init__``) may import which others, at module level, in a
function or under ``TYPE_CHECKING``. Every import must be allowed here and every allowance
used, so this table, and docs/architecture.md drawn from it, is the house as built."""

ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"

MAX_FUNCTION_LINES = 60
"""A longer function is split into functions whose names say what each part does (no
exceptions: a hot path keeps its per-step body inline and moves set-up out)."""

MAX_MODULE_LINES = 800
"""A longer module holds more than one idea: it is split (no exceptions)."""


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


def _unit_of_file(name: str) -> str:
    """The part of pipecheck a file (``cli/compare.py``, ``config.py``) belongs to."""
    first = name.split("/")[0]
    if first == "__init__.py":
        return "pipecheck"
    return first.removesuffix(".py")


def _units() -> set[str]:
    return {_unit_of_file(name) for name, _, _ in _modules()}


def _own_imports(name: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) for every import of a pipecheck module in file ``name``, wherever it
    is (module level, a function, a ``TYPE_CHECKING`` block); relative imports resolved."""
    package = ["pipecheck", *name.removesuffix(".py").split("/")][:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            # `from pipecheck import stats` imports the module pipecheck.stats
            out += ([(node.lineno, f"{base}.{a.name}") for a in node.names]
                    if base == "pipecheck" else [(node.lineno, base)])
    return sorted((line, m) for line, m in out if m == "pipecheck" or m.startswith("pipecheck."))


def _unit_of_module(module: str, units: set[str]) -> str:
    part = module.split(".")[1] if "." in module else "pipecheck"
    return part if part in units else "pipecheck"  # a name of pipecheck/__init__.py


def layering_problems(modules: list[tuple[str, ast.Module, list[str]]],
                      allowed: dict[str, frozenset[str]]) -> list[str]:
    """Imports between parts of pipecheck that ``allowed`` does not list, allowances no
    import uses, and parts missing from the table."""
    units = {_unit_of_file(name) for name, _, _ in modules} | set(allowed)
    problems = [f"{u} is not in the table of allowed imports; place it"
                for u in sorted(units - set(allowed))]
    used: set[tuple[str, str]] = set()
    for name, tree, _ in modules:
        source = _unit_of_file(name)
        for line, module in _own_imports(name, tree):
            target = _unit_of_module(module, units)
            if target == source:
                continue
            used.add((source, target))
            if target not in allowed.get(source, frozenset()):
                problems.append(f"{name}:{line} imports {module} ({source} -> {target} is "
                                "not allowed)")
    problems += [f"{s} -> {t} is allowed but nothing imports it; drop it from the table"
                 for s in sorted(allowed) for t in sorted(allowed[s]) if (s, t) not in used]
    return problems


def layers(allowed: dict[str, frozenset[str]]) -> dict[str, int]:
    """Each part's layer: 0 for what imports nothing of pipecheck, else one above the
    highest it imports. Raises ValueError on a cycle (then there are no layers)."""
    out: dict[str, int] = {}

    def layer(unit: str, path: tuple[str, ...]) -> int:
        if unit in path:
            raise ValueError("import cycle: " + " -> ".join((*path[path.index(unit):], unit)))
        if unit not in out:
            below = [layer(u, (*path, unit)) for u in allowed.get(unit, ())]
            out[unit] = 1 + max(below) if below else 0
        return out[unit]

    for unit in allowed:
        layer(unit, ())
    return out


def drawing(allowed: dict[str, frozenset[str]]) -> str:
    """The table as docs/architecture.md shows it: one line per part, top layer first."""
    level = layers(allowed)
    width = max(map(len, allowed))
    lines = []
    for unit in sorted(allowed, key=lambda u: (-level[u], u)):
        below = ", ".join(sorted(allowed[unit])) or "(nothing of pipecheck)"
        lines.append(f"{level[unit]}  {unit:<{width}}  -> {below}")
    return "\n".join(lines)


def _doc_drawing() -> str:
    text = ARCHITECTURE_DOC.read_text()
    start = text.index("<!-- layers:")
    block = text[text.index("```", start) + 3:]
    return block[block.index("\n") + 1:block.index("```")].rstrip("\n")


def test_every_import_between_parts_of_pipecheck_is_in_the_table() -> None:
    assert layering_problems(_modules(), ALLOWED_IMPORTS) == []


def test_the_table_has_layers_and_no_part_imports_another_that_imports_it() -> None:
    layers(ALLOWED_IMPORTS)  # raises on a cycle
    mutual = [(a, b) for a in ALLOWED_IMPORTS for b in ALLOWED_IMPORTS[a]
              if a in ALLOWED_IMPORTS.get(b, ())]
    assert mutual == []
    assert set(ALLOWED_IMPORTS) == _units()


ANALYSIS_WINGS = ("loader", "logs")
"""analysis/'s wings (sub-packages): each imports itself and analysis/'s shared modules only;
the shared modules import no wing."""


def _analysis_part(module: str) -> str | None:
    """``loader``, ``logs`` or ``shared`` for a module of pipecheck.analysis, else None."""
    parts = module.split(".")
    if parts[:2] != ["pipecheck", "analysis"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in ANALYSIS_WINGS else "shared"


def _analysis_imports(name: str, tree: ast.Module) -> list[tuple[int, str]]:
    """``_own_imports``, with ``from pipecheck.analysis[.WING] import a, b`` read as the
    modules a and b."""
    packages = {"pipecheck.analysis", *(f"pipecheck.analysis.{w}" for w in ANALYSIS_WINGS)}
    out = [(line, m) for line, m in _own_imports(name, tree) if m not in packages]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in packages:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                    if a.name not in ANALYSIS_WINGS]
    return out


def wall_problems(modules: list[tuple[str, ast.Module, list[str]]]) -> list[str]:
    """Imports across analysis/'s walls, and import cycles between its modules."""
    problems, graph = [], {}
    for name, tree, _ in modules:
        source = "pipecheck." + name.removesuffix(".py").replace("/", ".")
        here = _analysis_part(source)
        if here is None:
            continue
        graph[source] = set()
        for line, module in _analysis_imports(name, tree):
            there = _analysis_part(module)
            if there is None:
                continue
            graph[source].add(module)
            if there != here and not (here in ANALYSIS_WINGS and there == "shared"):
                problems.append(f"{name}:{line} imports {module} ({here} -> {there} crosses "
                                "analysis/'s walls)")
    seen: dict[str, int] = {}

    def visit(m: str, path: tuple[str, ...]) -> None:
        if m in path:
            problems.append("import cycle: " + " -> ".join((*path[path.index(m):], m)))
            return
        if seen.get(m):
            return
        for n in sorted(graph.get(m, ())):
            visit(n, (*path, m))
        seen[m] = 1

    for m in sorted(graph):
        visit(m, ())
    return problems


def test_analysis_wings_import_only_themselves_and_the_shared_modules() -> None:
    assert wall_problems(_modules()) == []


def test_the_wall_check_fails_on_a_crossing_and_a_cycle() -> None:
    def mod(name: str, text: str) -> tuple[str, ast.Module, list[str]]:
        return name, ast.parse(text), text.splitlines()

    modules = [
        mod("analysis/loader/tuner.py", "from pipecheck.analysis.logs import maxtext\n"),
        mod("analysis/logs/maxtext.py", "from pipecheck.analysis import verdict\n"),
        mod("analysis/verdict.py", "from pipecheck.analysis.loader.tuner import x\n"),
    ]
    got = wall_problems(modules)
    assert any("loader -> logs crosses" in p for p in got)
    assert any("shared -> loader crosses" in p for p in got)
    assert any(p.startswith("import cycle:") for p in got)


def test_architecture_doc_draws_the_checked_table() -> None:
    assert _doc_drawing() == drawing(ALLOWED_IMPORTS)


MODULE_NAME = re.compile(r"(?<![\w/.])(\w+\.py)\b")
"""A module's file name as the package tree names it: ``loop.py``, alone or in a list
(``compile_watch.py, sync_locator.py``); not ``analysis/logs/maxtext.py``, a module of another
sub-package named in passing."""


def _tree_lines() -> list[str]:
    """The package tree of docs/architecture.md: the code block that opens with
    ``pipecheck/``."""
    text = ARCHITECTURE_DOC.read_text()
    start = text.index("```\npipecheck/\n") + len("```\n")
    return text[start:text.index("```", start)].splitlines()


def tree_sections(lines: list[str]) -> dict[str, str]:
    """The text the tree holds under each heading: ``""`` for the package's top, else a
    sub-package's path (``"analysis/"``, ``"logs/maxtext/"``). A heading is a line
    ``name/`` indented one step (2 spaces) below the heading it sits under; every other line
    belongs to the innermost heading indented less than it, so a description's continuation
    lines, however indented, stay with their heading."""
    sections: dict[str, list[str]] = {}
    stack: list[tuple[int, str]] = []  # (indent, path) of the headings the line sits under
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and indent <= stack[-1][0]:
            stack.pop()
        first = line.split()[0]
        parent_indent, parent = stack[-1] if stack else (-2, None)
        if re.fullmatch(r"\w+/", first) and indent == parent_indent + 2:
            path = "" if parent is None else parent + first
            stack.append((indent, path))
            sections.setdefault(path, [])
            line = line.replace(first, "", 1)
        sections.setdefault(stack[-1][1] if stack else "", []).append(line)
    return {path: "\n".join(text) for path, text in sections.items()}


def unmapped_modules(files: list[str], sections: dict[str, str]) -> list[str]:
    """The modules (``analysis/loader/whatif.py``, relative to the package) that the tree does not
    name under their sub-package's heading, each with where to add it; ``__init__.py`` files
    need not be named."""
    problems = []
    for name in sorted(files):
        folder, _, module = name.rpartition("/")
        folder = folder + "/" if folder else ""
        if module == "__init__.py":
            continue
        where = f"`{folder}`" if folder else "the top of the tree (`pipecheck/`)"
        if folder not in sections:
            problems.append(f"pipecheck/{name}: the tree has no heading `{folder}`; add one "
                            f"(indented under its parent) with a line for {module}")
        elif module not in MODULE_NAME.findall(sections[folder]):
            problems.append(f"pipecheck/{name} is missing: add `{module}` with a one-line "
                            f"description of the idea it owns under {where}")
    return problems


def named_but_absent(files: list[str], sections: dict[str, str]) -> list[str]:
    """Modules the tree names under a heading that have no file there (renamed, moved or
    deleted since the tree was written)."""
    present = set(files)
    return [f"docs/architecture.md names {folder}{module} under `{folder or 'pipecheck/'}`, "
            "but there is no such file: rename or remove it in the tree"
            for folder, text in sorted(sections.items())
            for module in sorted(set(MODULE_NAME.findall(text)))
            if folder + module not in present]


def _package_files() -> list[str]:
    return [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")]


def test_the_architecture_tree_names_every_module() -> None:
    """docs/architecture.md's package tree is the whole map: every module under pipecheck/
    is named, under its sub-package's heading, with the idea it owns."""
    problems = unmapped_modules(_package_files(), tree_sections(_tree_lines()))
    assert problems == [], ("docs/architecture.md's package tree (the code block that opens "
                            "with `pipecheck/`) misses modules:\n" + "\n".join(problems))


def test_the_architecture_tree_names_no_module_that_does_not_exist() -> None:
    problems = named_but_absent(_package_files(), tree_sections(_tree_lines()))
    assert problems == [], "\n".join(problems)


def test_the_tree_check_reads_headings_lists_and_continuations() -> None:
    """Headings nest by indentation; a line listing several modules names each; a
    continuation line that starts with a folder (``measure/ and ...``) is no heading; a
    module of another sub-package named in passing does not count."""
    tree = ["pipecheck/",
            "  units.py        units",
            "  logs/           reading files; text.py opens plain files,",
            "                  and hands timelines to analysis/profile.py",
            "    maxtext/        MaxText logs: blocks.py,",
            "                    clock.py",
            "  monitor/        the Monitor, above",
            "                  measure/ and report/:",
            "    loop.py         the loop",
            "  measure/        what touches the clock:",
            "    compile_watch.py, sync_locator.py   compile events; where the host waited"]
    sections = tree_sections(tree)
    assert sorted(sections) == ["", "logs/", "logs/maxtext/", "measure/", "monitor/"]
    files = ["__init__.py", "units.py", "stats.py", "logs/__init__.py", "logs/text.py",
             "logs/runs.py", "logs/maxtext/blocks.py", "logs/maxtext/clock.py",
             "monitor/loop.py", "measure/compile_watch.py", "measure/sync_locator.py",
             "measure/faults.py", "data/sources.py"]
    assert unmapped_modules(files, sections) == [
        "pipecheck/data/sources.py: the tree has no heading `data/`; add one (indented under "
        "its parent) with a line for sources.py",
        "pipecheck/logs/runs.py is missing: add `runs.py` with a one-line description of the "
        "idea it owns under `logs/`",
        "pipecheck/measure/faults.py is missing: add `faults.py` with a one-line description "
        "of the idea it owns under `measure/`",
        "pipecheck/stats.py is missing: add `stats.py` with a one-line description of the idea "
        "it owns under the top of the tree (`pipecheck/`)",
    ]
    assert named_but_absent([f for f in files if f != "logs/maxtext/clock.py"], sections) == [
        "docs/architecture.md names logs/maxtext/clock.py under `logs/maxtext/`, but there is "
        "no such file: rename or remove it in the tree"]


def test_the_layering_check_fails_on_an_upward_import() -> None:
    """An import the table does not allow is reported wherever it hides (in a function,
    under TYPE_CHECKING, relative), and a table with a cycle has no layers."""
    upward = ast.parse("from typing import TYPE_CHECKING\n"
                       "def f():\n    from pipecheck.measure import spans\n"
                       "if TYPE_CHECKING:\n    import pipecheck.report.trace\n"
                       "from ..analysis import stats\n")
    modules = [*[m for m in _modules() if m[0] != "records/common.py"],
               ("records/common.py", upward, [])]
    problems = layering_problems(modules, ALLOWED_IMPORTS)
    assert [p for p in problems if p.startswith("records/common.py")] == [
        "records/common.py:3 imports pipecheck.measure (records -> measure is not allowed)",
        "records/common.py:5 imports pipecheck.report.trace (records -> report is not allowed)",
        "records/common.py:6 imports pipecheck.analysis (records -> analysis is not allowed)",
    ]
    unused = {**ALLOWED_IMPORTS, "units": frozenset({"errors"})}
    assert "units -> errors is allowed but nothing imports it; drop it from the table" in \
        layering_problems(_modules(), unused)
    assert drawing(unused) != drawing(ALLOWED_IMPORTS)  # the doc's copy would be stale
    unplaced = {u: a for u, a in ALLOWED_IMPORTS.items() if u != "units"}
    assert "units is not in the table of allowed imports; place it" in \
        layering_problems(_modules(), unplaced)
    cyclic = {**ALLOWED_IMPORTS, "records": ALLOWED_IMPORTS["records"] | {"measure"}}
    with pytest.raises(ValueError, match="import cycle: .*records -> measure -> .*records"):
        layers(cyclic)


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


def _too_long(modules: list[tuple[str, ast.Module, list[str]]]) -> list[str]:
    """Modules over MAX_MODULE_LINES, and functions over MAX_FUNCTION_LINES (a comment
    giving a reason does not excuse one)."""
    problems = []
    for name, tree, lines in modules:
        if len(lines) > MAX_MODULE_LINES:
            problems.append(f"{name} is {len(lines)} lines (at most {MAX_MODULE_LINES})")
        for fn in _functions(tree):
            length = fn.end_lineno - fn.lineno + 1  # type: ignore[operator]
            if length > MAX_FUNCTION_LINES:
                problems.append(f"{name}:{fn.lineno} {fn.name}() is {length} lines")
    return problems


def test_no_module_or_function_is_over_the_line_limit() -> None:
    assert _too_long(_modules()) == []


def test_the_line_limits_fail_on_a_long_module_and_any_long_function() -> None:
    body = "    x = 1\n" * MAX_FUNCTION_LINES
    text = ("def short():\n    pass\n\n\n# long: one table, read in one place\n"
            f"def explained():\n{body}\n\ndef unexplained():\n{body}\n\n"
            "def at_the_limit():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))
    text += "\n" * (MAX_MODULE_LINES + 1 - len(text.splitlines()))
    lines = text.splitlines()
    assert _too_long([("m.py", ast.parse(text), lines)]) == [
        f"m.py is {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES})",
        *(f"m.py:{lines.index(f'def {fn}():') + 1} {fn}() is {MAX_FUNCTION_LINES + 1} lines"
          for fn in ("explained", "unexplained"))]
    short = "\n".join(lines[:4])
    assert _too_long([("m.py", ast.parse(short), short.splitlines())]) == []


def test_the_checks_see_what_they_check() -> None:
    """The checks above would fail on a long function and on a light lazy import."""
    tree = ast.parse("def f():\n    import os\n" + "    x = 1\n" * 70)
    fn = _functions(tree)[0]
    assert fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[operator]
    imports = [n for n in ast.walk(fn) if isinstance(n, ast.Import)]
    assert [m for n in imports for m in _imported(n)] == ["os"]
    assert "os" not in LAZY_LIBRARIES


if __name__ == "__main__":  # the drawing for docs/architecture.md, after a change of the table
    print(drawing(ALLOWED_IMPORTS))
