"""The one base error of pxp: every error pxp raises derives from `PxpError`.

Its message is the one line a user sees (CLI or app), never a trace. It lives in the pure
core so that every layer, the protocol rules included, can derive from it importing nothing
above itself.
"""

from __future__ import annotations


class PxpError(Exception):
    """An error pxp raises on purpose; `str(error)` is the user's one line."""
