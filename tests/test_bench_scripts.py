"""The benchmarks (bench/; docs/development.md, Benchmarks) measure this checkout from any working directory: each
script that imports pxp or tests imports bench/checkout.py first, which puts the checkout's root after PYTHONPATH's
folders (so `PYTHONPATH=<worktree>` measures that worktree) and before site-packages, where streamlit-ketcher
installs a package of its own named `tests`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def _module_imports(path: Path) -> list[str]:
    """The modules a script imports at its top level, in order."""
    names: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_every_bench_script_imports_the_checkout_before_pxp_or_tests() -> None:
    late = []
    for path in sorted(BENCH.glob("bench_*.py")):
        names = _module_imports(path)
        first = next((i for i, n in enumerate(names) if n.split(".")[0] in ("pxp", "tests", "bench_browser")), None)
        if first is not None and "checkout" not in names[:first]:
            late.append(path.name)
    assert late == []


def _bench_help(script: str, cwd: Path, pythonpath: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, str(BENCH / script), "--help"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_bench_script_runs_from_elsewhere_and_pythonpath_comes_first(tmp_path: Path) -> None:
    """bench_data.py imports tests.study_sample: this checkout's without PYTHONPATH (not streamlit-ketcher's
    `tests`, which has no such module), the worktree's when PYTHONPATH names one."""
    alone = _bench_help("bench_data.py", tmp_path, None)
    assert alone.returncode == 0 and alone.stdout.startswith("usage: bench_data.py"), alone.stderr
    other = tmp_path / "worktree"
    (other / "tests").mkdir(parents=True)
    (other / "tests" / "__init__.py").write_text("")
    (other / "tests" / "study_sample.py").write_text("raise SystemExit('the worktree named by PYTHONPATH')\n")
    first = _bench_help("bench_data.py", tmp_path, str(other))
    assert first.returncode == 1 and "the worktree named by PYTHONPATH" in first.stderr, first.stderr
