"""The accessibility audit of the browser tests (docs/accessibility.md): axe-core, as bundled by the PyPI
package axe-playwright-python (nothing is downloaded at test time), injected into every frame of the
page and run from the top one over WCAG 2.0, 2.1 and 2.2 A and AA; a critical or serious violation fails, and
so does an accessible name that begins with an icon's ligature (glyph_names).

The only violations let through are Ketcher's own (a third-party editor in its own frame), each listed
in KETCHER_KNOWN with its upstream reference and in docs/accessibility.md, and only inside Ketcher's frame.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from axe_playwright_python.base import AXE_SCRIPT

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
OPTIONS = {"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations"]}
#: the editor's frame (pxp.app.annotate.ketcher serves its build under this path)
KETCHER_FRAME = 'iframe[src*="/component/pxp.app.annotate.ketcher.ketcher/"]'
#: axe rule → the upstream report, for what Ketcher's own markup gets wrong and pxp cannot fix from
#: outside (docs/accessibility.md, "Known exceptions")
KETCHER_KNOWN: dict[str, str] = {}


#: the window sizes every page and state is audited at
SIZES = ({"width": 1280, "height": 720}, {"width": 1920, "height": 1080})


def _inside_ketcher(node: dict[str, Any]) -> bool:
    """Whether axe's node is inside the editor's frame (its target is a chain of frames, then the element)."""
    target = node.get("target") or []
    return len(target) > 1 and any("pxp.app.annotate.ketcher" in str(t) for t in target[:-1])


def violations(page: Any) -> list[str]:
    """The critical and serious WCAG A/AA violations on the page as it is, one line each (rule, impact,
    the first elements), except KETCHER_KNOWN inside Ketcher's frame."""
    for frame in page.frames:
        if not frame.is_detached():
            with contextlib.suppress(Exception):  # a frame replaced meanwhile: axe says what it cannot reach
                frame.evaluate(AXE_SCRIPT)
    result = page.evaluate("(o) => axe.run(document, o)", OPTIONS)
    out = []
    for v in result["violations"]:
        if v["impact"] not in ("critical", "serious"):
            continue
        nodes = [n for n in v["nodes"] if not (v["id"] in KETCHER_KNOWN and _inside_ketcher(n))]
        if nodes:
            where = "; ".join(f"{n['target']} {n['html'][:120]}" for n in nodes[:3])
            out.append(f"{v['id']} ({v['impact']}, {len(nodes)}): {where}")
    return out


#: the Material icons pxp shows (":material/NAME:" in its source): their ligature text is no name
GLYPHS = frozenset(m for f in (Path(__file__).resolve().parents[2] / "pxp").rglob("*.py")
                   for m in re.findall(r":material/([a-z0-9_]+):", f.read_text()))
#: a named node of Playwright's accessibility snapshot: its role and name
_NAMED = re.compile(r'^\s*- ([a-z]+) "((?:[^"\\]|\\.)*)"', re.M)


def glyph_names(page: Any) -> list[str]:
    """The accessible names (Playwright's snapshot of the page's accessibility tree) that begin with an icon's
    ligature ("send Send", "thumb_up I agree", "smart_toy icon"), one line each."""
    snapshot = page.locator("body").aria_snapshot()
    return [f"{role} {name!r} names a glyph" for role, name in _NAMED.findall(snapshot)
            if name.split(" ", 1)[0] in GLYPHS]


def painted(page: Any) -> None:
    """Two animation frames: the layout after a resize or a script run is painted."""
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


def audit(page: Any, where: str) -> list[str]:
    """violations() of the page as it is at each of SIZES (the window resized, the page not reloaded), each line
    prefixed with `where` and the size; the window's own size is given back."""
    own = page.viewport_size
    found = []
    for size in SIZES:
        page.set_viewport_size(size)
        painted(page)
        found += [f"{where} at {size['width']}x{size['height']}: {v}" for v in violations(page) + glyph_names(page)]
    page.set_viewport_size(own)
    return found
