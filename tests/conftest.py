"""Shared fixtures: a fresh SQLite file per test, and a fresh PostgreSQL database (migrated ones are copies of
one migrated template per test process, so they stay separate under pytest-xdist workers).

PostgreSQL: PXP_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test).
Outside CI a missing server skips those tests with the reason; with CI=true it fails.
The study files: `study` is each test once on generated files in the published format and once on the
published sample (marked `published`: skipped when the sample is absent, failed when CI=true; tests/study_sample.py).
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url, text

from pxp.storage.store import cached_urls, forget_engine, make_engine, upgrade
from tests.study_sample import PUBLISHED, Study, generate

# The app's first start makes the demo films in the background (about 15 s of work): only the tests that are
# about them turn it on (tests/app/test_app.py), so servers started by other tests stay light.
os.environ.setdefault("PXP_DEMO_FILMS", "0")
# Likewise the background warming of the Analytics views (pxp.analysis.warm): on in the tests about it
# (tests/app/test_analytics_warm.py), so other tests count only what their pages compute.
os.environ.setdefault("PXP_WARM", "0")
pytest_plugins = ["tests.cpu_times", "pytester"]  # `--cpu-times N`: each test's CPU time; pytester tests it
PG_URL = os.environ.get("PXP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def _background_work_ends_with_its_test() -> Iterator[None]:
    """A page that serves a case prepares the next one in a server thread a moment later (pxp.app.prepare), which
    may draw a 2048-px film: a test of the pages stops it here (or waits for it, once under way), so the next test
    in this process does not count it (a memory test traces every thread's allocations). The engines the test
    made pxp cache go with it too."""
    before = cached_urls()
    yield
    prepare = sys.modules.get("pxp.app.prepare")
    if prepare is not None:
        prepare.stop_preparations()
    # the engines pxp cached for this test's databases (one per URL, pxp.storage.core.get_engine): disposed, so
    # that a test process does not keep every earlier test's connections, pools and compiled statements (about
    # 5,000 objects a database, which every full garbage collection then walks: docs/development.md, Tests)
    for url in cached_urls() - before:
        forget_engine(url)
    instances = sys.modules.get("pxp.running.pxp.instances")
    if instances is not None:  # its entries keep their engine (and its pool and statements) alive until evicted
        instances.CACHE.clear()
    if "streamlit" in sys.modules:  # an in-process app (AppTest) caches its resources per process, as a server does
        import streamlit as st

        st.cache_resource.clear()
        st.cache_data.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test module's last test, what the process still holds (the libraries it imported, the session's
    fixtures) is collected once and then frozen out of the garbage collector's sight (`gc.freeze`): a full
    collection then walks only what later tests make, where it walked the whole heap, each of a worker's 20-30
    full collections 0.5-1 s (docs/development.md, Tests)."""
    yield
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Each in-process app (Streamlit's AppTest) scans every installed package's metadata for Streamlit
    components, 0.15 s of CPU each time, where a server scans once: here the scan is made once per test
    process, the packages being the same for the whole run (docs/development.md, Tests)."""
    scanner = sys.modules.get("streamlit.components.v2.manifest_scanner")
    if scanner is None and "streamlit.testing.v1" in sys.modules:
        import streamlit.components.v2.manifest_scanner as scanner
    scan = getattr(scanner, "scan_component_manifests", None)
    if scan is not None and not hasattr(scan, "cache_info"):
        scanner.scan_component_manifests = functools.cache(scan)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` (20 s or more on 2 CPUs) first: pytest-xdist hands out single tests in
    collection order, and a long one collected last would finish the run alone on one worker while
    the others idle (docs/development.md, Tests)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `published` needs the published study sample: skipped without it, failed in CI."""
    if item.get_closest_marker("published") is None or (PUBLISHED / "data").is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the published study sample is required in CI but missing at {PUBLISHED} (set PXP_STUDY_SAMPLE)",
                    pytrace=False)
    pytest.skip(f"no published study sample at {PUBLISHED} (set PXP_STUDY_SAMPLE to its folder)")


@pytest.fixture(scope="session")
def generated_study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    """Study files generated in the published format, once per test process."""
    return generate(tmp_path_factory.mktemp("study") / "pxp-study")


@pytest.fixture(params=["generated", pytest.param("published", marks=pytest.mark.published)])
def study(request: pytest.FixtureRequest) -> Study:
    """The study files: generated ones, then the published sample."""
    if request.param == "published":
        return Study(PUBLISHED)
    return request.getfixturevalue("generated_study")  # type: ignore[no-any-return]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'pxp.db'}"


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite file per test process, copied for each test (migrating takes ~0.4 s; a copy ~0.01 s)."""
    path = tmp_path_factory.mktemp("template") / "pxp.db"
    e = make_engine(f"sqlite:///{path}")
    upgrade(e)
    e.dispose()  # the last connection closes: the WAL is checkpointed into the file
    return path


@pytest.fixture
def engine(db_url: str, tmp_path: Path, _sqlite_template: Path) -> Iterator[Engine]:
    """A fresh SQLite database at `db_url`, migrated to head (a copy of the migrated template)."""
    shutil.copyfile(_sqlite_template, tmp_path / "pxp.db")
    e = make_engine(db_url)
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


@contextmanager
def _database(admin: Engine, template: str | None = None) -> Iterator[str]:
    """A new PostgreSQL database (a copy of `template` if given), dropped afterwards; yields its URL."""
    name = f"pxp_t_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            ))
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    admin = _pg_admin()
    if admin is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_URL} (set PXP_TEST_POSTGRES_URL)")
    with _database(admin) as url:
        yield url
    admin.dispose()


@pytest.fixture(scope="session")
def _pg_template() -> Iterator[tuple[Engine, str] | None]:
    """One migrated PostgreSQL database per test process; each `pg_engine` is a copy of it (CREATE DATABASE
    ... TEMPLATE), so Alembic runs once per process rather than once per test. None when unreachable."""
    admin = _pg_admin()
    if admin is None:
        yield None
        return
    with _database(admin) as url:
        e = make_engine(url)
        upgrade(e)
        e.dispose()  # a template must have no open connection while it is copied
        yield admin, str(make_url(url).database)
    admin.dispose()


@pytest.fixture
def pg_engine(request: pytest.FixtureRequest, _pg_template: tuple[Engine, str] | None) -> Iterator[Engine]:
    """A fresh PostgreSQL database for one test, migrated to head (a copy of the migrated template).
    A test that also asks for `pg_url` gets that database, migrated."""
    if "pg_url" in request.fixturenames:
        e = make_engine(request.getfixturevalue("pg_url"))
        upgrade(e)
        yield e
        e.dispose()
        return
    if _pg_template is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_URL} (set PXP_TEST_POSTGRES_URL)")
    admin, template = _pg_template
    with _database(admin, template) as url:
        e = make_engine(url)
        yield e
        e.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_engine(request: pytest.FixtureRequest) -> Engine:
    """The same test on SQLite and on PostgreSQL."""
    name = "engine" if request.param == "sqlite" else "pg_engine"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]
