"""Which database pxp uses (docs/operations.md, Settings): the URL from --db, PXP_DATABASE_URL or ./pxp.db, the
databases pxp may use, and a SQLite URL's file. No table classes: a command that only looks at the URL (`pxp
doctor` before a database exists) does not load them (docs/development.md, "Start-up")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pxp.storage.faults import StoreError
from pxp.storage.settings import get_settings

#: a SQLite URL whose file SQLAlchemy's `make_url` reads as the text after `///` (no query, nothing unquoted):
#: its file is known without loading SQLAlchemy (tests/cli/test_startup.py compares the two)
_PLAIN_SQLITE = re.compile(r"sqlite(?:\+pysqlite)?:///([^?%]+)")


def database_url(url: str | None = None) -> str:
    """The URL to use: the explicit one, else PXP_DATABASE_URL, else ./pxp.db.

    `postgres://` (the form hosting services print) and `postgresql://` map to psycopg.
    """
    url = url or get_settings().database_url
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("postgres", "postgresql"):
        return f"postgresql+psycopg://{rest}"
    if sep and scheme.lower().startswith("postgres+"):
        return f"postgresql+{scheme.partition('+')[2]}://{rest}"
    return url


def sqlite_file(url: str | None = None) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory ones)."""
    url = database_url(url)
    plain = _PLAIN_SQLITE.fullmatch(url)
    if plain is not None and (path := _file(plain[1])) is not None:
        return path
    parsed = supported_url(url)  # (an in-memory database is refused here)
    return _file(parsed.database or "") if parsed.get_backend_name() == "sqlite" else None


def _file(database: str) -> Path | None:
    """The file a SQLite URL's database part names; None for none, one in memory or a `file:` URI."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


_EXAMPLE_URLS = "sqlite:///pxp.db or postgresql+psycopg://user@host/db"


def supported_url(url: str) -> Any:
    """The parsed URL of a SQLite or PostgreSQL database; StoreError (one line) for anything else."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(f"the database URL {url.split('@')[-1]!r} is not a URL; give e.g. {_EXAMPLE_URLS}") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"pxp stores its data in SQLite or PostgreSQL, not {parsed.get_backend_name()!r}; "
                         f"give e.g. {_EXAMPLE_URLS}")
    if parsed.get_backend_name() == "sqlite" and (parsed.database or ":memory:") == ":memory:":
        raise StoreError(f"the database URL {url!r} names no file (a database in memory keeps nothing, and each "
                         "connection would see its own); give e.g. sqlite:///pxp.db")
    return parsed


