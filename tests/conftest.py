"""Shared fixtures: a fresh SQLite file per test, and a fresh PostgreSQL database.

PostgreSQL: PXP_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test).
Outside CI a missing server skips those tests with the reason; with CI=true it fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from pxp.storage.store import make_engine, upgrade

SHARED = Path(__file__).resolve().parents[2] / "shared"
STUDY = SHARED / "data" / "pxp-study"
PG_URL = os.environ.get("PXP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'pxp.db'}"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    e = make_engine(db_url)
    upgrade(e)
    yield e
    e.dispose()


def _pg_admin() -> Engine | None:
    try:
        admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text("select 1"))
        return admin
    except Exception as err:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"PostgreSQL is required in CI but unreachable: {err}") from err
        return None


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    admin = _pg_admin()
    if admin is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_URL} (set PXP_TEST_POSTGRES_URL)")
    name = f"pxp_t_{uuid.uuid4().hex[:12]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as c:
            c.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            ))
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    e = make_engine(pg_url)
    upgrade(e)
    yield e
    e.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_engine(request: pytest.FixtureRequest) -> Engine:
    """The same test on SQLite and on PostgreSQL."""
    name = "engine" if request.param == "sqlite" else "pg_engine"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]
