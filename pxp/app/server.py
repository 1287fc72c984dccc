"""The app's server (`pxp app` runs this file): Streamlit's st.App serving the page script pxp/app/streamlit_app.py
for every visit, which opens the database as the server starts (pxp.app.resources.opened; docs/development.md, Reading a
study). A checkout's streamlit_app.py is the same server."""

import streamlit as st

from pxp.app import PAGE
from pxp.app.resources import opened

app = st.App(str(PAGE), lifespan=opened)
