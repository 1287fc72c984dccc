"""pxp's Streamlit app: routing only (st.navigation over pages/, DESIGN §3 and §7)."""

from pathlib import Path

import streamlit as st

from pxp.app import resources

st.set_page_config(page_title="pxp — PXP protocol", page_icon=":material/forum:", layout="wide")

_here = Path(__file__).parent / "pages"
pages = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/annotate.py", title="Annotate", icon=":material/edit_note:"),
    st.Page("pages/sessions.py", title="Sessions", icon=":material/forum:"),
    st.Page("pages/experiments.py", title="Experiments", icon=":material/science:"),
]
if (_here / "analytics.py").exists():
    pages.append(st.Page("pages/analytics.py", title="Analytics", icon=":material/insights:"))
pages += [
    st.Page("pages/datasets.py", title="Datasets", icon=":material/dataset:"),
    st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
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
with resources.routed():
    page.run()
