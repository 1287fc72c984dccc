"""The layout (docs/development.md, Layers and contracts): no import cycle anywhere inside pxp/, no module over the
size limit, no folder over the module limit.

The layer contracts themselves are import-linter's (pyproject.toml, `lint-imports` in .ci/run);
this test adds what a layers contract does not see: cycles between modules of one package,
including imports made inside functions (grimp records those too).
"""

from __future__ import annotations

import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
#: modules in one folder, `__init__.py` not counted (docs/development.md "Architecture": one folder per concern)
MAX_MODULES = 15
#: modules allowed over the limit, each with the reason (docs/development.md "Architecture")
OVER_LIMIT: dict[str, str] = {}


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            if i < len(adj[v]):
                work.append((v, i + 1))
                w = adj[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def test_no_import_cycle_inside_pxp() -> None:
    graph = grimp.build_graph("pxp", cache_dir=None)
    assert len(graph.modules) > 50
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_planted_cycle(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from planted import b\n")
    (pkg / "b.py").write_text("from planted import c\n")
    (pkg / "c.py").write_text("import planted.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("planted", cache_dir=None)) == [["planted.a", "planted.b", "planted.c"]]


def test_no_module_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for p in (ROOT / "pxp").rglob("*.py") if "migrations/versions" not in str(p)}
    over = {f: n for f, n in sizes.items() if n > MAX_LINES and f not in OVER_LIMIT}
    assert over == {}


def test_no_folder_over_the_module_limit() -> None:
    """Migrations are the schema's history, not modules of a concern, and are not counted."""
    counts = {str(d.relative_to(ROOT)): len([p for p in d.glob("*.py") if p.name != "__init__.py"])
              for d in [ROOT / "pxp", *(ROOT / "pxp").rglob("*")]
              if d.is_dir() and "__pycache__" not in d.parts and "migrations" not in d.parts}
    assert {d: n for d, n in counts.items() if n > MAX_MODULES} == {}


def test_no_test_imports_a_page_script() -> None:
    """A page in pxp/app/views/ renders when imported (it opens the database of the working directory): tests
    and modules take a page's constants from its non-page parts instead."""
    from pxp.app.router import PAGES

    pages = {f"pxp.app.views.{name.removesuffix('.py')}" for name, _, _ in PAGES}
    found = []
    for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "pxp").rglob("*.py")]:
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(?:from|import)\s+([\w.]+)", line)
            if m and m.group(1) in pages:
                found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert found == []
