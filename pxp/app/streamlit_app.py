"""The package's Streamlit main script (run by `pxp app`): routing only, see pxp.app.router."""

from pxp.app import first_start_at_once

drawn = first_start_at_once()  # a fresh database's first page, drawn before the app's imports

from pxp.app.router import route  # noqa: E402

route(drawn)
