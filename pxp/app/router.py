"""pxp's page routing (st.navigation over the pages in pxp/app/views/, DESIGN §3 and §7).

The pages live inside the package, in a folder Streamlit does not auto-discover (it
only looks for `pages/` beside the main script), so even the first visitor who opens
a page URL directly gets pxp's navigation. Both entry points (the checkout's
streamlit_app.py and the package's pxp/app/streamlit_app.py) call route().
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import streamlit as st
from PIL import Image, ImageDraw

from pxp.app import resources

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
)


@cache
def page_icon() -> Image.Image:
    """The tab icon, drawn locally: a material/emoji icon would be fetched from an external host."""
    img = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle((4, 8, 44, 38), radius=8, fill=(38, 99, 235))
    d.rounded_rectangle((20, 26, 60, 56), radius=8, fill=(16, 185, 129))
    return img


def route() -> None:
    """Set up the page, start the store (migrations, demo data) and run the chosen page."""
    st.set_page_config(page_title="pxp — PXP protocol", page_icon=page_icon(), layout="wide")
    pages = [
        st.Page(str(VIEWS / name), title=title, icon=icon, default=i == 0)
        for i, (name, title, icon) in enumerate(PAGES)
        if (VIEWS / name).exists()
    ]
    page = st.navigation(pages)
    try:
        started = resources.start()
    except resources.DatabaseUnavailable as err:
        st.error(f"{err}. Check PXP_DATABASE_URL (or the database_url secret).", icon=":material/error:")
        st.stop()
    notice = started.fresh_notice()
    if notice and not st.session_state.get("app_notice_shown"):
        st.session_state["app_notice_shown"] = True
        st.toast(notice)
    page.run()
