"""The package's Streamlit main script (run by `pxp app`): routing only, see pxp.app.router."""

from pxp.app.router import route

route()
