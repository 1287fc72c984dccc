"""The app's server (`pxp app` runs this file): Streamlit's st.App, which opens the database as it starts
(pxp.app.resources.opened; docs/development.md, Reading a study) and runs the page script pxp/app/streamlit_app.py
for every visit. A checkout's streamlit_app.py is the same server."""

import streamlit as st

from pxp.app import PAGE
from pxp.app.resources import opened

app = st.App(str(PAGE), lifespan=opened)
