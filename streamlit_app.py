"""Entry point for `streamlit run streamlit_app.py` in a checkout: routing only, see pxp.app.router."""

from pxp.app.router import route

route()
