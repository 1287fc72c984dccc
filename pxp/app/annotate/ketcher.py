"""Ketcher as the app serves it (docs/annotating.md, "Drawing the reactants"): streamlit-ketcher's own
build, quicker to start, pre-filled with a molfile.

Three things in that build hold Ketcher back as it starts, on two cores: it draws the first 50
structures of its Salts and Solvents library into hidden boxes only to keep their pictures for when
that tab is opened (about 1.4 s of the page's one thread); its Indigo toolkit's web worker (about
6 MB of script and WebAssembly) is written into the build's one large chunk as base64 text, so the
server compresses and sends, and the page decodes, 12 MB before anything can start; and that chunk
is asked for only once the first script has run. The app serves a copy of the build in which the
library's pictures are drawn when that tab is opened (as every other library tab does), the worker
is a file of its own that the worker thread loads itself, and the page asks for the chunk at once.
Nothing else differs. Each change is made only where the build holds exactly what it expects (this
streamlit-ketcher); a build without them is served as it is: the same Ketcher, slower to start. The
copy is made once a server process, in a directory of its own (mode 0700, removed at exit).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import functools
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pxp.data.chem import InvalidSmiles, molfile

#: the Salts and Solvents pictures drawn at start (ketcher-react's `initSaltsAndSolventsTemplates`:
#: `templates.slice(0, 50).forEach(draw)`), and the same drawing none
PREDRAW = "A1=function(U,F){U.slice(0,50).forEach("
LATER = "A1=function(U,F){U.slice(0,0).forEach("
#: the Indigo worker made from base64 text in the chunk (rollup-plugin-web-worker-loader), and the
#: same worker loaded from its own file beside index.html
INLINE_WORKER = re.compile(r'var W=function\(U,F,Q\)\{var R;return function\(B\)\{return R=R\|\|e\(U,F,Q\),'
                           r'new Worker\(R,B\)\}\}\("([A-Za-z0-9+/=]+)",null,!1\);')
WORKER_FILE = "indigo-worker.js"
OWN_WORKER = ('var W=function(U){return function(B){return new Worker(U,B)}}'
              f'(new URL("{WORKER_FILE}",document.baseURI).href);')
WORKER_HEAD = "/* rollup-plugin-web-worker-loader */"
#: the component's name in URLs (/component/<module>.<NAME>/)
NAME = "ketcher"


def light_build(build: Path, into: Path) -> list[str]:
    """Copy the Ketcher build `build` (streamlit-ketcher's `frontend` folder) to `into`, without its
    source maps, with each change of the module docstring that the build holds as expected; the
    changes made (none: `into` is not made)."""
    js = build / "static" / "js"
    chunks = {p: p.read_text(encoding="utf-8") for p in sorted(js.glob("*.chunk.js"))}
    big = max(chunks, key=lambda p: len(chunks[p]), default=None)
    if big is None:
        return []
    text, made = chunks[big], list[str]()
    if text.count(PREDRAW) == 1:
        text, made = text.replace(PREDRAW, LATER), [*made, "salts and solvents drawn when opened"]
    worker = _worker(text)
    if worker is not None:
        text, made = INLINE_WORKER.sub(lambda _: OWN_WORKER, text), [*made, "Indigo's worker a file"]
    index = (build / "index.html").read_text(encoding="utf-8")
    if index.count("</head>") == 1:
        link = f'<link rel="preload" href="./static/js/{big.name}" as="script">'
        index, made = index.replace("</head>", link + "</head>"), [*made, "the chunk asked for at once"]
    if made:
        shutil.copytree(build, into, ignore=shutil.ignore_patterns("*.map"))
        (into / big.relative_to(build)).write_text(text, encoding="utf-8")
        (into / "index.html").write_text(index, encoding="utf-8")
        if worker is not None:
            (into / WORKER_FILE).write_text(worker, encoding="utf-8")
    return made


def _worker(chunk: str) -> str | None:
    """The Indigo worker's script written into `chunk`, as the build's loader makes it (the base64
    text read as Latin-1, its first line dropped), if the chunk holds exactly one such worker."""
    found = INLINE_WORKER.findall(chunk)
    if len(found) != 1:
        return None
    try:
        source = base64.b64decode(found[0], validate=True).decode("latin-1")
    except (binascii.Error, ValueError):
        return None
    if not source.startswith(WORKER_HEAD):
        return None
    return source[source.index("\n", 10) + 1:]


@functools.cache
def component() -> Callable[..., Any]:
    """The Ketcher component: streamlit-ketcher's, served from a light copy of its build (light_build)
    where one can be made, else from the package as it is."""
    import streamlit.components.v1 as components
    import streamlit_ketcher

    build = Path(streamlit_ketcher.__file__).parent / "frontend"
    home = Path(tempfile.mkdtemp(prefix="pxp-ketcher-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    try:
        made = light_build(build, home / "frontend")
    except (OSError, UnicodeError):
        made = []
    return components.declare_component(NAME, path=str(home / "frontend" if made else build))


def st_ketcher(value: str, *, height: int, key: str) -> str:
    """streamlit_ketcher.st_ketcher on `component()`: Ketcher pre-filled with the SMILES `value`; its
    value is the SMILES of the molecules applied last, else `value`.

    The pre-fill goes to Ketcher as a molfile drawn by RDKit (pxp.data.chem.molfile), which Ketcher
    reads itself: the molecules are on its canvas as soon as it is up, not once its Indigo toolkit
    has started (about 1 s later on two cores; Indigo reads a SMILES). A `value` RDKit cannot read,
    or lay out, goes as it is. Apply gives Indigo's SMILES, as streamlit-ketcher's does."""
    try:
        molecule = molfile(value) if value.strip() else ""
    except (InvalidSmiles, RuntimeError, ValueError):  # RDKit's own errors are of these kinds
        molecule = value
    return str(component()(molecule=molecule, height=height, molecule_format="SMILES", key=key,
                           default=value) or "")
