"""Entry point for `streamlit run streamlit_app.py` in a checkout: the app's server (as pxp.app.server), serving the
package's page script pxp/app/streamlit_app.py for every visit and opening the database as it starts."""

import streamlit as st

from pxp.app import PAGE
from pxp.app.resources import opened

app = st.App(str(PAGE), lifespan=opened)
