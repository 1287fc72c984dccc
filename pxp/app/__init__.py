"""Interfaces: the Streamlit app. Helpers here (cached resources, data functions, rendering),
the pages in `views`, the router in `router`, the scorekeeping game's play in `scorekeeping`.

Pages call these helpers and never touch the ORM, SQL or an LLM SDK (DESIGN §3, §7). May import
every layer below; only the app and the CLI import streamlit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

#: first start's page (docs/operations.md, First start): drawn at once (first_start_at_once), then with its
#: progress (pxp.app.router.wait_for_demo)
FIRST_START_TITLE = "PXP: talk a case through with the machine"
FIRST_START_LINE = ("First start: pxp is making its demo in this database (once), so there is something to try "
                    "with no API key. The page opens when it is ready.")
PAGE_TITLE = "pxp — PXP protocol"
#: the page script the server runs for every visit (pxp.app.server, a checkout's streamlit_app.py)
PAGE = Path(__file__).with_name("streamlit_app.py")


def secret(name: str) -> str | None:
    """A Streamlit secret as text (None when unset or outside a running app's secrets)."""
    import streamlit as st

    try:
        value = st.secrets.get(name)
    except Exception:
        return None
    return str(value) if value else None


def database_url() -> str:
    """PXP_DATABASE_URL, else the Streamlit secret of that name, else database_url, else ./pxp.db."""
    import os

    from pxp.storage.settings import get_settings

    if "PXP_DATABASE_URL" in os.environ:
        return get_settings().database_url
    return secret("PXP_DATABASE_URL") or secret("database_url") or get_settings().database_url


def _new_sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database URL when that file does not exist yet, else None."""
    scheme, sep, rest = url.partition(":///")
    path = rest.split("?", 1)[0]
    if not sep or not scheme.startswith("sqlite") or path in ("", ":memory:") or Path(path).exists():
        return None
    return Path(path)


def first_start_at_once() -> DeltaGenerator | None:
    """On a database not made yet (a SQLite file that does not exist), first start's page at once: what is being
    made and a progress bar, drawn before the app's own imports and the database's tables (a second or more on
    two cores), which pxp.app.router.wait_for_demo then draws over with the demo's steps (docs/operations.md,
    First start). Imports only streamlit and the settings; the page's place when it drew it."""
    if _new_sqlite_file(database_url()) is None:
        return None
    import streamlit as st

    from pxp.app.a11y import page as a11y

    st.set_page_config(page_title=PAGE_TITLE, layout="wide")
    a11y.install()
    holder = st.empty()  # where wait_for_demo draws its page, or which route empties
    with holder.container():
        st.title(FIRST_START_TITLE)
        st.caption(FIRST_START_LINE)
        st.progress(0.0, text="Making the database's tables")
    return holder


#: glibc mallopt parameters (malloc.h): large blocks always mmapped, few thread arenas
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8
MMAP_THRESHOLD = 256 * 1024
ARENA_MAX = 2


def bound_native_heap() -> bool:
    """Keep the server's C heap from growing with transient megabyte buffers (docs/development.md, Memory budgets).

    Streamlit runs every script run in a new thread; glibc gives threads their own arenas
    (up to 8 per core) and, after the first large free, raises its mmap threshold to 32 MB, so
    each run's display PNG, its base64 copy and the serialised message (megabytes each) land in
    arenas that are fragmented and never returned: measured, RSS grew ~1 MB per submit. A fixed
    threshold of 256 KB (blocks above it are mmapped and unmapped on free) and 2 arenas stop
    that (as MALLOC_MMAP_THRESHOLD_=262144 MALLOC_ARENA_MAX=2 would). True when applied; a no-op
    off glibc.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_ARENA_MAX, ARENA_MAX))
