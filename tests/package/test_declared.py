"""Every module the code and the tests import is declared (docs/development.md): a third-party import in
`pxp/`, `tests/`, `bench/` or `scripts/` belongs to a distribution named in pyproject.toml's dependencies (for
`pxp/`) or its dependencies and `test` extra (for the rest), so a fresh clone's one install command brings it.
A module that was only ever installed by hand on a developer's machine fails here.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: modules of the repository itself, not distributions
OWN = {"pxp", "tests", "bench", "scripts", "conftest"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def _imports(folder: Path) -> dict[str, str]:
    """Top-level module → the first file importing it, for absolute imports in the folder's Python files."""
    seen: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                seen.setdefault(mod.split(".")[0], str(path.relative_to(ROOT)))
    return seen


def _undeclared(folder: str, declared: set[str]) -> list[str]:
    owners = metadata.packages_distributions()
    # a distribution counts as declared if it is named, or is required by one that is (transitively)
    closure = set(declared)
    todo = list(declared)
    while todo:
        try:
            reqs = metadata.requires(todo.pop()) or []
        except metadata.PackageNotFoundError:
            continue
        for req in reqs:
            if "extra ==" in req:
                continue
            (name,) = _names([req])
            if name not in closure:
                closure.add(name)
                todo.append(name)
    # a sibling module imported by its bare name (pytest's rootdir-relative imports, a bench beside another)
    local = {p.stem for p in (ROOT / folder).rglob("*.py")}
    bad = []
    for mod, where in sorted(_imports(ROOT / folder).items()):
        if mod in OWN | local or mod in sys.stdlib_module_names or mod == "__future__":
            continue
        dists = {d.lower().replace("_", "-") for d in owners.get(mod, [])}
        if not dists & closure:
            bad.append(f"{mod} ({where}; from {sorted(dists) or 'no installed distribution'})")
    return bad


def test_every_import_of_the_package_is_a_declared_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _undeclared("pxp", _names(project["dependencies"])) == []


def test_every_import_of_the_tests_and_benches_is_declared_for_the_test_install() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = _names(project["dependencies"] + project["optional-dependencies"]["test"])
    bad = [b for folder in ("tests", "bench", "scripts") if (ROOT / folder).is_dir()
           for b in _undeclared(folder, declared)]
    assert bad == []
