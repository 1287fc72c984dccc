"""The app's page script: the server (pxp.app.server, a checkout's streamlit_app.py) runs it for every visit;
routing only, see pxp.app.router."""

from pxp.app import first_start_at_once

drawn = first_start_at_once()  # a fresh database's first page, drawn before the app's imports

from pxp.app.router import route  # noqa: E402

route(drawn)
