"""Cached resources of the app: the database engine (opened as the server starts), first start, machine agents.

The engine is a Streamlit cached resource (one per database URL); the machine agents (which
hold the LLM SDK clients) sit in a byte-bounded LRU (pxp.llm.bytecache). Both are shared by every
browser session of the server process.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

import streamlit as st
from sqlalchemy import Engine

from pxp.agents.base import Agent
from pxp.app import bound_native_heap
from pxp.app import database_url as database_url
from pxp.app import secret as secret
from pxp.app.prefs import KEY_NAMES
from pxp.app.ui import escape_md
from pxp.errors import one_line
from pxp.llm.bytecache import MB, byte_cached
from pxp.llm.keys import add_key_source
from pxp.protocols.errors import PxpError
from pxp.protocols.settings import value as setting
from pxp.storage.faults import describe, is_database_error, is_transient, shown_database
from pxp.storage.store import get_engine, is_empty
from pxp.team.config import ConfigError, Secrets, check_login_follows_team, has_bom, read_secrets, roles_held


def _key_secret(name: str) -> str | None:
    """An LLM key from Streamlit secrets, only inside a running app."""
    from streamlit.runtime import exists

    return secret(name) if exists() else None


add_key_source(_key_secret)  # the LLM layer reads keys from Streamlit secrets when the app runs
bound_native_heap()  # transient megabyte buffers of script runs are returned to the system


def _files() -> tuple[tuple[str, int, int], ...]:
    """The secrets files Streamlit reads, with their size and modification time (the cache key)."""
    from streamlit import config

    out = []
    for name in config.get_option("secrets.files"):
        try:
            stat = os.stat(os.path.expanduser(name))
            out.append((name, stat.st_mtime_ns, stat.st_size))
        except OSError:
            out.append((name, 0, -1))
    return tuple(out)


def _named() -> bool:
    """Whether Streamlit was told which secrets files to read (a flag, a config file, an environment variable):
    then each must exist (pxp.team.config.read_secrets)."""
    from streamlit import config
    from streamlit.config_option import ConfigOption

    return config.get_where_defined("secrets.files") != ConfigOption.DEFAULT_DEFINITION


_checked: dict[tuple[tuple[str, int, int], ...], Secrets | ConfigError] = {}


def checked_secrets() -> Secrets:
    """The secrets files, read and checked once per version of them (`ConfigError` if broken).

    A file Streamlit's own reader refuses but pxp accepts (a byte-order mark) is handed to
    Streamlit as its secrets, so login sees what the check saw."""
    key = _files()
    if key not in _checked:
        _checked.clear()
        try:
            secrets = read_secrets((name for name, _, _ in key), named=_named())
        except ConfigError as problem:
            _checked[key] = problem
        else:
            _checked[key] = secrets
            if secrets.files and has_bom(secrets.files) and not st.secrets.load_if_toml_exists():
                st.secrets.merge_programmatic_secrets(dict(secrets.values))
    found = _checked[key]
    if isinstance(found, ConfigError):
        raise found
    return found


def config_problem() -> str | None:
    """The one line why the app must not serve (a broken secrets file), or None."""
    try:
        checked_secrets()
    except ConfigError as problem:
        return str(problem)
    return None


class DemoMaking:
    """First start's demo, made in a background thread while the app draws its pages (docs/operations.md, First
    start): which step of pxp.running.pxp.controlled.demo.DEMO_STEPS is being made, and the notice once done."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        self.steps = steps
        self.step, self.now = 0, steps[0]
        self.finished = threading.Event()
        self.notice: str | None = None

    def progress(self, step: int, what: str) -> None:
        self.step, self.now = step, what

    def line(self) -> tuple[float, str]:
        """(fraction done, what is being made) for a progress bar."""
        return self.step / len(self.steps), f"Making {self.now} ({self.step + 1} of {len(self.steps)})"


@dataclass(frozen=True)
class Started:
    """The engine and what first start did (migrations, demo data: `making` while it is being made)."""

    engine: Engine
    notice: str | None = None
    at: float = field(default_factory=time.time)
    making: DemoMaking | None = None

    _taken: list[bool] = field(default_factory=list, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def fresh_notice(self, within: float = 600.0) -> str | None:
        """The first-start notice, once per database: the first visit in the first minutes
        takes it; later visits and reruns get None."""
        notice = self.making.notice if self.making is not None else self.notice
        if notice is None or time.time() - self.at >= within:
            return None
        with self._lock:
            if self._taken:
                return None
            self._taken.append(True)
        return notice


@st.cache_resource(show_spinner="Opening the database…")  # type: ignore[misc]  # streamlit's decorator is untyped
def _start(url: str) -> Started:
    engine = get_engine(url)
    warm(engine)
    if not is_empty(engine):
        return Started(engine)
    try:
        from pxp.running.pxp.controlled.demo import DEMO_STEPS
    except ImportError:
        return Started(engine, "No demo data is installed yet: import a dataset on the Datasets page.")
    making = DemoMaking(DEMO_STEPS)
    threading.Thread(target=_make_demo, args=(engine, making), name="pxp-demo", daemon=True).start()
    return Started(engine, making=making)


def warm(engine: Engine) -> None:
    """The Analytics views' first results, computed in a background thread of this server once per engine
    (pxp.analysis.warm; docs/development.md, Reading a study); PXP_WARM=0 turns it off."""
    if not setting("PXP_WARM"):
        return
    from pxp.analysis.warm import start_warming

    start_warming(engine, _warm_steps)


def _warm_steps(engine: Engine) -> list[tuple[str, Callable[[], object]]]:
    from pxp.app.analytics_data import warm_steps  # pandas and the analyses load in the warming thread

    return warm_steps(engine)


def _make_demo(engine: Engine, making: DemoMaking) -> None:
    """First start's background step: the demo (pxp.running.pxp.controlled.demo.ensure_demo), then, once the pages
    may open, the demo films."""
    from pxp.running.pxp.controlled.demo import ensure_demo

    try:
        ensure_demo(engine, progress=making.progress)
    except Exception as err:
        making.notice = f"The demo data could not be loaded: {' '.join(str(err).split())}"
        making.finished.set()
        return
    loaded = "Demo data loaded: a synthetic chest X-ray set and a drug-synthesis set."
    films = demo_films_wanted()
    making.notice = loaded if not films else (
        f"{loaded} The demo films (demo-rad-films: 2048-px 12-bit DICOM, for the Lung, Soft tissue and Bone windows) "
        "are being made and appear in the Dataset list in about 15 s.")
    making.finished.set()
    if films:
        _make_demo_films(engine)


def demo_films_wanted() -> bool:
    """Whether first start makes the demo films too (docs/annotating.md, Pages); PXP_DEMO_FILMS=0 turns it off."""
    return bool(setting("PXP_DEMO_FILMS"))


def _make_demo_films(engine: Engine) -> None:
    """First start's background step: the demo films, after the demo (all-or-nothing, like every import); a
    failure is one log line and leaves the demo as it is."""
    from pxp.errors import user_message
    from pxp.running.pxp.controlled.demo import ensure_demo_films

    try:
        ensure_demo_films(engine)
    except Exception as err:  # another replica made them first, or the disk is full: the demo stands
        logging.getLogger("pxp.app").warning("the demo films were not made: %s", user_message(err))


class DatabaseUnavailable(PxpError, RuntimeError):
    """The database cannot be opened or migrated: one line for the user."""


def start() -> Started:
    """The app's database: migrated to the latest schema, with demo data on first start."""
    from sqlalchemy.exc import SQLAlchemyError

    url = database_url()
    try:
        return _start(url)
    except PxpError as err:
        raise DatabaseUnavailable(one_line(str(err))) from None
    except (SQLAlchemyError, OSError, ValueError) as err:
        raise DatabaseUnavailable(f"cannot open the database {shown_database(url)}: {describe(err)}") from None


def engine() -> Engine:
    return start().engine


#: what the expert reads when the database stops answering mid-page
AWAY_LINE = ("The database {database} is not answering ({fault}). Nothing is lost: what you typed stays in the "
             "form; press Send again once it is back.")


@contextmanager
def database_away() -> Iterator[None]:
    """A page (or fragment) whose database stops answering: one line, never the driver's text, and
    the run ends; the reply form's fields are kept by the page (pxp.app.annotate.drafts)."""
    try:
        yield
    except Exception as exc:
        if not is_database_error(exc):
            raise
        st.error(escape_md(AWAY_LINE.format(database=shown_database(database_url()), fault=describe(exc))),
                 icon=":material/cloud_off:")


#: an agent's memory (its SDK client, connection pool) cannot be sized cheaply: each counts as
#: MACHINE_COST against the byte budget of the machine cache (docs/development.md, Memory budgets)
MACHINE_COST = 1 * MB
MACHINE_BYTES = 32 * MB


@byte_cached(MACHINE_BYTES, size=lambda _agent: MACHINE_COST)
def _machine(url: str, experiment_id: int) -> Agent:
    from pxp.running.pxp.live.turns import machine_for

    return machine_for(get_engine(url), experiment_id)


def machine(experiment_id: int) -> Agent:
    """The machine agent of a live experiment (simulated or an LLM), built once."""
    return _machine(database_url(), experiment_id)


def key_status() -> dict[str, str | None]:
    """Where each provider key is present ("environment", "Streamlit secrets") — never the key."""
    out: dict[str, str | None] = {}
    for name in KEY_NAMES:
        if os.environ.get(name):
            out[name] = "environment"
        elif secret(name):
            out[name] = "Streamlit secrets"
        else:
            out[name] = None
    return out


def secret_keys() -> dict[str, str]:
    """Keys present only in Streamlit secrets, to hand to a worker's environment."""
    out = {}
    for name in KEY_NAMES:
        value = secret(name)
        if value and not os.environ.get(name):
            out[name] = value
    return out


#: the team's roles last read from each database (login_problem)
_last_roles: dict[str, dict[str, int]] = {}


def login_problem(engine: Engine) -> str | None:
    """Why this database must not be served as it is configured (a team, and login off), or None.

    Read on every run of a page: a member added while the app serves closes the open app at once."""
    if auth_configured():
        return None
    url = database_url()
    try:
        roles = _last_roles[url] = roles_held(engine)
    except Exception as exc:
        # the database went away: the last answer read from it stands (nobody adds a member to a database that
        # does not answer), so the page shows its own one line and keeps what the expert typed
        if not (is_database_error(exc) and is_transient(exc) and url in _last_roles):
            return f"The team of the database {shown_database(url)} cannot be read ({describe(exc)}): nothing is " \
                   "served until it can."
        roles = _last_roles[url]
    try:
        check_login_follows_team(url, roles, Secrets((), {}))
    except ConfigError as problem:
        return str(problem)
    return None


def auth_configured() -> bool:
    """Whether OIDC login is configured in secrets ([auth]) so st.login can be used. Fails closed:
    secrets that cannot be read count as login on (the router serves only their error line)."""
    try:
        if checked_secrets().login_on:
            return True
    except ConfigError:
        return True
    try:
        return bool(st.secrets.get("auth"))
    except Exception:  # no secrets at all: login off (the demo)
        return False


#: the thread that opens the database as the server starts, and its log
OPENING = "pxp-open"
_LOG = logging.getLogger("pxp.app")


@asynccontextmanager
async def opened(_app: object) -> AsyncIterator[None]:
    """The server's lifespan (Streamlit's st.App): the database opened in a thread as the server starts
    (open_at_start), so that the first visitor does not wait for it (docs/development.md, Reading a study)."""
    threading.Thread(target=open_at_start, name=OPENING, daemon=True).start()
    yield


class _NoRunWarning(logging.Filter):
    """Streamlit warns that a cached resource is made outside a script run: expected in the opening thread."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != OPENING


def open_at_start() -> None:
    """What the first page would do first, done as the server starts by `start`: the database migrated, first
    start's demo begun and the Analytics warming started, shared with every visit by Streamlit's resource cache.
    A broken configuration opens nothing, and a database that cannot be opened is tried again by each page: each
    is one line in the server's log, and the pages say it as before (docs/operations.md, Troubleshooting)."""
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NoRunWarning())
    problem = config_problem()
    if problem is not None:
        _LOG.warning("pxp serves only this line until the configuration is mended: %s", problem)
        return
    try:
        start()
    except DatabaseUnavailable as unavailable:
        _LOG.warning("pxp could not open its database at start (each page will try again): %s", unavailable)
