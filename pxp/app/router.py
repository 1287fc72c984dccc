"""pxp's page routing (st.navigation over the pages in pxp/app/views/, DESIGN §3 and §7).

The pages live inside the package, in a folder Streamlit does not auto-discover (it
only looks for `pages/` beside the main script), so even the first visitor who opens
a page URL directly gets pxp's navigation. Both entry points (the checkout's
streamlit_app.py and the package's pxp/app/streamlit_app.py) call route().

With login on (docs/operations.md, Login and roles) each page needs a role: a page the user's role may not open
is hidden from the navigation and its URL answers with one line; an annotator's
`?session=` must name a session they hold.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import streamlit as st
from PIL import Image, ImageDraw
from streamlit.delta_generator import DeltaGenerator

from pxp.app import FIRST_START_LINE, FIRST_START_TITLE, PAGE_TITLE, auth, resources, ui
from pxp.app.a11y import page as a11y
from pxp.team.access import may_open

VIEWS = Path(__file__).resolve().parent / "views"

#: (file in views/, title, icon); the first is the default page.
PAGES = (
    ("home.py", "Home", ":material/home:"),
    ("annotate.py", "Annotate", ":material/edit_note:"),
    ("sessions.py", "Sessions", ":material/forum:"),
    ("experiments.py", "Experiments", ":material/science:"),
    ("analytics.py", "Analytics", ":material/insights:"),
    ("scorekeeping.py", "Scorekeeping", ":material/scoreboard:"),
    ("datasets.py", "Datasets", ":material/dataset:"),
    ("settings.py", "Settings", ":material/settings:"),
    ("audit.py", "Audit", ":material/policy:"),
)
#: the least role that may open each page when login is on (an annotator's Sessions: their own only)
NEEDS = {"home.py": "annotator", "annotate.py": "annotator", "sessions.py": "annotator",
         "experiments.py": "researcher", "analytics.py": "researcher", "datasets.py": "admin",
         "scorekeeping.py": "researcher", "settings.py": "admin", "audit.py": "admin"}


def can_open(name: str) -> bool:
    """Whether the current user's role may open the page `name` (a file in views/, NEEDS)."""
    return auth.allowed(auth.current_role(), NEEDS[name])


@cache
def page_icon() -> Image.Image:
    """The tab icon, drawn locally: a material/emoji icon would be fetched from an external host."""
    img = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle((4, 8, 44, 38), radius=8, fill=(38, 99, 235))
    d.rounded_rectangle((20, 26, 60, 56), radius=8, fill=(16, 185, 129))
    return img


def route(drawn: DeltaGenerator | None = None) -> None:
    """Set up the page, start the store (migrations, demo data), check the login and run the
    chosen page if the user's role may open it. `drawn`: where first start's page is drawn already, the
    accessibility installed before it (pxp.app.first_start_at_once)."""
    st.set_page_config(page_title=PAGE_TITLE, page_icon=page_icon(), layout="wide")
    if drawn is None:
        a11y.install()  # the focus ring and the page script, login screens too (docs/accessibility.md)
    problem = resources.config_problem()
    if problem is not None:  # a broken configuration never serves (docs/operations.md, Troubleshooting)
        st.error(ui.escape_md(problem), icon=":material/error:")
        st.stop()
    try:
        started = resources.start()
    except resources.DatabaseUnavailable as err:
        st.error(f"{ui.escape_md(str(err))}. Check PXP_DATABASE_URL (or the database_url secret).",
                 icon=":material/error:")
        st.stop()
    if started.making is not None and not started.making.finished.is_set():
        wait_for_demo(started.making, drawn)
    elif drawn is not None:
        drawn.empty()
    problem = resources.login_problem(started.engine)
    if problem is not None:  # login follows the team (docs/operations.md, Login and roles)
        st.error(ui.escape_md(problem), icon=":material/lock:")
        st.stop()
    user = auth.gate()
    role = auth.current_role()
    pages = {
        name: st.Page(str(VIEWS / name), title=title, icon=icon, default=i == 0,
                      visibility="visible" if auth.allowed(role, NEEDS[name]) else "hidden")
        for i, (name, title, icon) in enumerate(PAGES)
        if (VIEWS / name).exists()
    }
    page = st.navigation(list(pages.values()))
    auth.sidebar(user)
    title = next((t for name, t, _ in PAGES if pages.get(name) is page and not auth.allowed(role, NEEDS[name])),
                 None)
    if title is not None:
        st.error(f"Your role ({role}) may not open the {title} page.", icon=":material/block:")
        st.stop()
    guard_session_param(role)
    notice = started.fresh_notice()
    if notice and not st.session_state.get("app_notice_shown"):
        st.session_state["app_notice_shown"] = True
        st.toast(ui.escape_md(notice))
    with resources.database_away():
        page.run()


def wait_for_demo(making: resources.DemoMaking, holder: DeltaGenerator | None = None) -> None:
    """First start (docs/operations.md, First start): at once a drawn page saying what is being made, its progress
    until the demo is ready, then the page asked for in its place (in `holder`, where it was drawn at once)."""
    holder = holder if holder is not None else st.empty()
    with holder.container():
        st.title(FIRST_START_TITLE)
        st.caption(FIRST_START_LINE)
        fraction, line = making.line()
        bar = st.progress(fraction, text=line)
    while not making.finished.wait(0.2):
        fraction, line = making.line()
        bar.progress(fraction, text=line)
    holder.empty()


def guard_session_param(role: str) -> None:
    """A `?session=` in the URL: below researcher, only a session the user holds (one line otherwise)."""
    raw = st.query_params.get("session")
    if raw is None or auth.allowed(role, "researcher"):
        return
    me = auth.annotator_id()
    if not raw.isdigit() or me is None or not may_open(resources.engine(), int(raw), me):
        st.error(ui.escape_md(f"You may not open session {raw[:20]!r}: it is not one of yours."),
                 icon=":material/block:")
        st.stop()
