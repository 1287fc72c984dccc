"""One clear line for any error that reaches a user (CLI or app); never a trace.

A database fault is named by `pxp.storage.faults.describe` (no SQL, parameters or stored values);
any other text is cut at what a driver appends (`[SQL: …]`, `[parameters: …]`, a help link).
"""

from __future__ import annotations

import re

from pxp.protocols.errors import PxpError
from pxp.storage.faults import describe, is_database_error, shown_database

_DRIVER_TAIL = re.compile(r"\s*(\\?\[SQL:|\\?\[parameters:|\(Background on this error at:|<psycopg\.|<sqlite3\.).*",
                          re.DOTALL)


def one_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of `text` (without a driver's appended statement or link), cut to `limit`."""
    text = _DRIVER_TAIL.sub("", text)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def user_message(exc: BaseException, database: str | None = None) -> str:
    """A one-line description of `exc` for people, not programmers (a PxpError's message is that line); a
    database fault names `database` (pxp.storage.faults.shown_database) when given."""
    if isinstance(exc, PxpError):
        return one_line(str(exc) or type(exc).__name__)
    if is_database_error(exc):
        return f"the database {database + ' ' if database else ''}failed: {describe(exc)}"
    if isinstance(exc, OSError) and exc.strerror:  # "[Errno 36] File name too long: '…'": the file, then why
        name = str(exc.filename) if exc.filename is not None else ""
        name = name if len(name) <= 120 else name[:60] + "…" + name[-40:]
        return one_line(f"{name}: {exc.strerror.lower()}" if name else exc.strerror.lower())
    text = str(exc) or type(exc).__name__
    return one_line(
        text if isinstance(exc, (ValueError, LookupError, RuntimeError, OSError)) else f"{type(exc).__name__}: {text}"
    )


def fault_note(exc: BaseException, engine: object) -> str:
    """The one line stored on a repetition an error stopped: a database fault names the database and
    the fault (pxp.storage.faults), anything else is `user_message`; never a driver's text."""
    if is_database_error(exc):
        return f"the database {shown_database(engine)} failed: {describe(exc)}"
    return user_message(exc)
