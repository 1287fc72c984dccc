"""The checkout a bench script measures, on its import path: imported first by every bench script that imports pxp
or tests (docs/development.md, Benchmarks).

The checkout's root goes after PYTHONPATH's folders, so that `PYTHONPATH=<worktree> python bench/...` measures that
worktree ("before" figures from an older commit), and before site-packages, where streamlit-ketcher installs a
package of its own named `tests` that would otherwise hide this checkout's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: PYTHONPATH's folders, which come first
FIRST = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

if str(ROOT) not in sys.path[: 1 + len(FIRST)]:
    sys.path.insert(1 + len(FIRST), str(ROOT))  # sys.path[0] is the script's folder, then PYTHONPATH's


def child_env() -> dict[str, str]:
    """The environment of a child Python process (`python -c`): the same path, PYTHONPATH's folders then the root."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*FIRST, str(ROOT)])}
