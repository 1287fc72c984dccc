"""One clear line for any error that reaches a user (CLI or app); never a trace."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from pxp.protocols.errors import PxpError


def one_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of `text`, cut to `limit` characters."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def user_message(exc: BaseException) -> str:
    """A one-line description of `exc` for people, not programmers (a PxpError's message is that line)."""
    if isinstance(exc, PxpError):
        return one_line(str(exc) or type(exc).__name__)
    if isinstance(exc, OperationalError):
        detail = " ".join(ln.strip() for ln in str(exc.orig).splitlines() if ln.strip())
        return one_line(f"cannot use the database: {detail}")
    if isinstance(exc, DBAPIError):
        return one_line(f"database error: {exc.orig}")
    if isinstance(exc, SQLAlchemyError):
        return one_line(f"database error: {exc}")
    text = str(exc) or type(exc).__name__
    return one_line(
        text if isinstance(exc, (ValueError, LookupError, RuntimeError, OSError)) else f"{type(exc).__name__}: {text}"
    )
