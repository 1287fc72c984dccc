"""No statement binds one parameter per stored row (docs/development.md, "Reading a study"): every
`.in_(...)` (and `.not_in(...)`) in pxp/ takes a literal, a subquery, or a list whose bound its line states with a
`# bounded: why` comment (the experiments a user picked, one page, one batch, a chunk of
pxp.storage.batches). A list that grows with the data (sessions, instances, messages) is a join, a
subquery or chunks instead: PostgreSQL takes at most 65,535 parameters, a usual SQLite build 32,766.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: `.in_` calls bounded without a comment on their line, each with the reason
ALLOWED = {
    ("pxp/team/access.py", "names"): "the groups one login's identity provider sent",
}


def _subquery(node: ast.expr) -> bool:
    """A select(...) call, or a method of one (.subquery(), .scalar_subquery(), .where(...))."""
    while isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and f.id.endswith("select"):
            return True
        if not isinstance(f, ast.Attribute):
            return False
        node = f.value
    return False


def unbounded_in_calls(source: str, path: str) -> list[str]:
    """`path:line` of each `.in_(...)` in `source` that is neither a literal nor a subquery nor commented
    `# bounded:` on one of its lines."""
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("in_", "not_in", "notin_")):
            continue
        arg = node.args[0] if node.args else None
        if isinstance(arg, ast.Tuple | ast.List | ast.Set) and all(isinstance(e, ast.Constant) for e in arg.elts):
            continue
        if arg is not None and _subquery(arg):
            continue
        if any("# bounded:" in ln for ln in lines[node.lineno - 1:(node.end_lineno or node.lineno)]):
            continue
        if arg is not None and (path, ast.unparse(arg)) in ALLOWED:
            continue
        out.append(f"{path}:{node.lineno}: {ast.unparse(node)[:80]}")
    return out


def test_no_in_list_grows_with_the_data() -> None:
    found = []
    for p in sorted((ROOT / "pxp").rglob("*.py")):
        found += unbounded_in_calls(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())
    assert found == [], "\n".join(found)


def test_the_check_finds_a_list_of_ids_and_passes_the_bounded_forms() -> None:
    src = (
        "q = select(M).where(M.c.session_id.in_(ids))\n"
        "q = select(M).where(M.c.session_id.in_([s.id for s in sessions]))\n"
        "q = select(M).where(M.c.tag.in_(('RATIFY', 'REFUTE')))\n"
        "q = select(M).where(M.c.session_id.in_(select(S.c.id).where(S.c.run_id == 1)))\n"
        "q = select(M).where(M.c.session_id.in_(sa_select(S.c.id).scalar_subquery()))\n"
        "q = select(M).where(M.c.session_id.in_(chunk))  # bounded: a chunk\n"
        "q = select(M).where(M.c.session_id.not_in(done))\n"
    )
    assert unbounded_in_calls(src, "x.py") == [
        "x.py:1: M.c.session_id.in_(ids)", "x.py:2: M.c.session_id.in_([s.id for s in sessions])",
        "x.py:7: M.c.session_id.not_in(done)"]
