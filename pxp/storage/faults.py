"""Database faults in one line (docs/operations.md "Troubleshooting"): what went wrong, never how.

A driver's or the ORM's text carries the SQL statement, its parameters (stored case text), object
reprs and links; none of it may reach a user or a log line. `describe` names the fault from a
fixed list of phrases (the database is unreachable, the connection was cut, the disk is full,
the file is read-only, it is locked) and otherwise only the error's class. `is_transient` says
which faults a run may wait out (a lost connection, a locked or full database) before pausing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pxp.protocols.errors import PxpError


class StoreError(PxpError, RuntimeError):
    """A database problem worth one clear line to the user."""


#: (pattern in the driver's message, the phrase shown), first match wins
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"database or disk is full|no space left|disk full|could not extend file|SQLITE_FULL",
     "the disk is full (or the database reached its size limit)"),
    (r"readonly database|read-only|read only|SQLITE_READONLY|cannot execute .* in a read-only",
     "the database is read-only"),
    (r"database is locked|SQLITE_BUSY|lock timeout|deadlock", "the database is locked by another process"),
    (r"disk I/O error|SQLITE_IOERR|input/output error", "a disk I/O error"),
    (r"unable to open database file|SQLITE_CANTOPEN", "the database file cannot be opened"),
    (r"file is not a database|file is encrypted|database disk image is malformed|SQLITE_NOTADB|SQLITE_CORRUPT",
     "the file is not a (sound) SQLite database"),
    (r"password authentication failed|no password supplied|authentication", "login to the database failed"),
    (r"database \"[^\"]*\" does not exist|does not exist", "the database does not exist"),
    (r"could not translate host name|Name or service not known|nodename nor servname",
     "the database host is unknown"),
    (r"Connection refused|connection to server .* failed|could not connect|timeout expired|timed out",
     "the database server cannot be reached"),
    (r"terminating connection|server closed the connection|connection (is )?closed|consuming input failed|"
     r"connection .*lost|SSL SYSCALL|EOF detected|the connection is lost|Broken pipe|"
     r"ConnectorException|connection reset",
     "the connection to the database was cut"),
)
_TRANSIENT = ("the connection to the database was cut", "the database server cannot be reached",
              "the database is locked by another process", "the disk is full (or the database reached its size limit)")


T = TypeVar("T")


class DatabaseFault(PxpError, RuntimeError):
    """A database fault as one line (see `describe`)."""


def _texts(err: BaseException) -> list[str]:
    """The messages of an error and its causes, driver first (never shown: only matched)."""
    out: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        orig = getattr(cur, "orig", None)
        if isinstance(orig, BaseException):
            out.append(f"{type(orig).__name__}: {orig}")
        out.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return out


def phrase(err: BaseException) -> str | None:
    """The fixed phrase for a known fault, or None."""
    text = "\n".join(_texts(err))
    for pattern, shown in _PHRASES:
        if re.search(pattern, text, flags=re.IGNORECASE):
            return shown
    return None


def describe(err: BaseException) -> str:
    """One line for a database fault: a fixed phrase, else the driver error's class name. No SQL,
    parameters, stored values, object reprs or links."""
    if isinstance(err, DatabaseFault):
        return str(err)
    known = phrase(err)
    if known is not None:
        return known
    orig = getattr(err, "orig", None)
    name = type(orig).__name__ if isinstance(orig, BaseException) else type(err).__name__
    return f"a database error ({name})"


def is_transient(err: BaseException) -> bool:
    """Whether a run may wait the fault out (retry for a bounded time) before it pauses."""
    return phrase(err) in _TRANSIENT


def is_database_error(err: BaseException) -> bool:
    """An error of the database or its driver (SQLAlchemy's, sqlite3's, psycopg's), by its class."""
    for cls in type(err).__mro__:
        module = cls.__module__ or ""
        if module.startswith(("sqlalchemy", "sqlite3", "psycopg", "psycopg_pool", "procrastinate")):
            return True
    return False


def shown_database(engine: Any) -> str:
    """The database as an error names it: a SQLite file's path, else the URL without its password. `engine` is an
    Engine, a URL, or None for pxp's default database (PXP_DATABASE_URL, else ./pxp.db)."""
    from sqlalchemy.engine import make_url

    if engine is None or isinstance(engine, str):
        from pxp.storage.settings import get_settings

        try:
            url = make_url(engine or get_settings().database_url)
        except Exception:  # not a URL: said as given, without what looks like a password
            return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", str(engine))[:200]
    else:
        url = engine.url
    if url.get_backend_name() == "sqlite" and url.database:
        return str(url.database)
    return str(url.render_as_string(hide_password=True))


def retrying(step: Callable[[], T], tries: int = 3, wait: float = 1.0) -> T:
    """`step()`, tried again (after `wait`, then twice that, ...) while it fails with a transient database
    fault; any other error, or the last try's fault, is raised. For steps that may be repeated: a read, or
    a write of a value that is set, not added."""
    for i in range(tries):
        try:
            return step()
        except Exception as exc:
            if i == tries - 1 or not (is_database_error(exc) and is_transient(exc)):
                raise
            time.sleep(wait * (i + 1))
    raise AssertionError("unreachable")  # tries >= 1
