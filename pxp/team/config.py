"""The configuration pxp serves with, checked before anything is served (docs/operations.md
"Troubleshooting"): the Streamlit secrets files and the database URL.

A secrets file that does not parse, a table that looks like one of pxp's but is misspelt
(`[auht]`), an `[auth]` without what login needs, a database URL that is not one, names an
unknown driver, cannot be reached or holds another application's tables: each is one line
naming the file (and line) or the database and what to do, and the app serves nothing else.

Login follows the team: a database whose team table has a member is served only with a complete
`[auth]`. Login is off only for a database with no team and secrets with no `[auth]`; then `pxp app`
listens on 127.0.0.1 unless an address is given. A secrets file named explicitly (`--secrets.files`, a
config file, `STREAMLIT_SECRETS_FILES`) must be a readable file, and a table holding what login needs
under another name than `[auth]` is refused ("did you mean [auth]?"): each would turn login off unseen.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pxp.protocols.errors import PxpError
from pxp.protocols.settings import DECLARED, SECRET, SettingError, check_secrets
from pxp.protocols.settings import value as setting_value
from pxp.protocols.text import strip_bom

if TYPE_CHECKING:
    from sqlalchemy import Engine

#: the top-level names of the secrets pxp reads (the API keys, the database, the login), from their declaration
KNOWN_KEYS = tuple(s.name for s in DECLARED if SECRET in s.sources)
#: what `st.login` needs in [auth] itself, and in [auth] or each [auth.<provider>]
AUTH_NEEDS = ("redirect_uri", "cookie_secret")
PROVIDER_NEEDS = ("client_id", "client_secret", "server_metadata_url")
#: the keys that say "this table is a login": found outside [auth], the table is a misnamed [auth]
LOGIN_KEYS = frozenset((*AUTH_NEEDS, *PROVIDER_NEEDS))


class ConfigError(PxpError, ValueError):
    """A configuration pxp will not serve with: one line naming the file or database and what to do."""


@dataclass(frozen=True)
class Secrets:
    """The secrets files read, merged as Streamlit merges them (later files win, per top-level key)."""

    files: tuple[Path, ...]
    values: Mapping[str, Any]

    @property
    def login_on(self) -> bool:
        return bool(self.values.get("auth"))


def _line_of(raw: bytes, offset: int) -> int:
    return raw[:offset].count(b"\n") + 1


def _parse(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    try:
        text = strip_bom(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}:{_line_of(raw, err.start)}: not UTF-8 text (byte 0x{raw[err.start]:02x}); "
                          "save the file as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        message = str(err)
        where = re.search(r"\(at line (\d+), column \d+\)", message)
        line = where.group(1) if where else "1"
        what = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        twice = re.match(r"Cannot declare \((.*)\) twice", what)
        if twice:
            table = ".".join(re.findall(r"'([^']*)'", twice.group(1)))
            what = f"the table [{table}] is declared twice"
        raise ConfigError(f"{path}:{line}: not valid TOML ({what}); fix it, or remove the file") from None


def _near_miss(path: Path, key: str) -> None:
    if key in KNOWN_KEYS:
        return
    close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.75)
    if not close and key.lower() in {k.lower() for k in KNOWN_KEYS}:
        close = [next(k for k in KNOWN_KEYS if k.lower() == key.lower())]
    if close:
        shown = f"[{close[0]}]" if close[0] == "auth" else close[0]
        raise ConfigError(f"{path}: {key!r} is not a setting pxp knows: did you mean {shown}? "
                          "Rename it, or remove it")


def _check_auth(path: Path, auth: Any) -> None:
    if not isinstance(auth, dict):
        raise ConfigError(f"{path}: auth must be a table ([auth]); see docs/operations.md, Login and roles")
    missing = [k for k in AUTH_NEEDS if not str(auth.get(k) or "").strip()]
    if missing:
        raise ConfigError(f"{path}: [auth] lacks {', '.join(missing)}, which login needs; "
                          "see docs/operations.md, Login and roles")
    if not str(auth["redirect_uri"]).rstrip().endswith("/oauth2callback"):
        raise ConfigError(f"{path}: [auth] redirect_uri must end with /oauth2callback (the app's URL + "
                          "/oauth2callback)")
    providers = {k: v for k, v in auth.items() if isinstance(v, dict)}
    direct = [k for k in PROVIDER_NEEDS if str(auth.get(k) or "").strip()]
    if not providers or direct:
        lacking = [k for k in PROVIDER_NEEDS if k not in direct]
        if lacking:
            raise ConfigError(f"{path}: [auth] lacks {', '.join(lacking)}, which login needs; "
                              "see docs/operations.md, Login and roles")
    for name, table in providers.items():
        lacking = [k for k in PROVIDER_NEEDS if not str(table.get(k) or "").strip()]
        if lacking:
            raise ConfigError(f"{path}: [auth.{name}] lacks {', '.join(lacking)}, which login needs; "
                              "see docs/operations.md, Login and roles")


def _login_keys(table: Mapping[str, Any], depth: int = 2) -> set[str]:
    """The keys of LOGIN_KEYS in a table or its sub-tables (a provider's [x.google])."""
    found = {k for k in table if k in LOGIN_KEYS}
    if depth > 1:
        for value in table.values():
            if isinstance(value, dict):
                found |= _login_keys(value, depth - 1)
    return found


def _misnamed_auth(path: Path, values: Mapping[str, Any]) -> None:
    """Login settings under another name than [auth] ([oidc], [login], top-level client_id): refused, since
    Streamlit would leave login off without a word."""
    loose = sorted(k for k in values if k in LOGIN_KEYS)
    if loose:
        raise ConfigError(f"{path}: {', '.join(loose)} must sit in the [auth] table, not at the top level: "
                          "did you mean [auth]? Move them under it")
    for key, value in values.items():
        if key == "auth" or not isinstance(value, dict):
            continue
        keys = _login_keys(value)
        if keys:
            raise ConfigError(f"{path}: [{key}] holds what login needs ({', '.join(sorted(keys))}), but pxp reads "
                              "login only from [auth] or [auth.<provider>]: did you mean [auth]? Rename it")


def _named_file(path: Path) -> None:
    """A secrets file named explicitly must be there and be a file: a mistyped path would turn login off."""
    if not path.exists():
        raise ConfigError(f"{path}: the secrets file named by secrets.files does not exist; fix the path, or "
                          "name no file")
    if not path.is_file():
        raise ConfigError(f"{path}: the secrets file named by secrets.files is not a file (a folder?); name the "
                          "secrets.toml file itself")


def read_secrets(files: Iterable[str | Path], *, named: bool = False) -> Secrets:
    """Every secrets file that exists, parsed (a byte-order mark accepted) and checked; the first
    problem raises `ConfigError`. With `named` (the files were given explicitly, not Streamlit's default
    places) each must exist and be a readable file."""
    found: list[Path] = []
    merged: dict[str, Any] = {}
    for name in files:
        path = Path(name).expanduser()
        if named:
            _named_file(path)
        elif not path.is_file():
            continue
        try:
            values = _parse(path)
        except OSError as err:
            raise ConfigError(f"{path}: cannot be read ({err.strerror or type(err).__name__}); "
                              "fix its permissions, or remove it") from None
        for key in values:
            _near_miss(path, key)
        try:
            check_secrets(values, str(path))
        except SettingError as bad:
            raise ConfigError(str(bad)) from None
        _misnamed_auth(path, values)
        if "auth" in values:
            _check_auth(path, values["auth"])
        found.append(path)
        merged.update(values)
    return Secrets(tuple(found), merged)


def has_bom(files: Iterable[str | Path]) -> bool:
    """Whether a secrets file starts with a byte-order mark (which Streamlit's own reader refuses)."""
    for name in files:
        path = Path(name).expanduser()
        try:
            if path.is_file() and path.read_bytes()[:3] == b"\xef\xbb\xbf":
                return True
        except OSError:
            continue
    return False


def check_database(url: str) -> None:
    """The database URL pxp would serve with: a URL, of a driver pxp knows, reachable, and empty or
    pxp's (a SQLite file not yet made is fine: pxp makes it); `ConfigError` otherwise."""
    from pxp.storage.faults import StoreError, describe
    from pxp.storage.urls import sqlite_file

    try:
        path = sqlite_file(url)  # a URL pxp cannot use is refused here (supported_url)
    except StoreError as err:
        raise ConfigError(f"{err}; fix --db, PXP_DATABASE_URL or database_url") from None
    if path is not None and not path.exists():
        if not path.parent.is_dir():
            raise ConfigError(f"{path}: its folder {path.parent} does not exist; create it or choose another path")
        return
    from pxp.storage.core import make_engine  # SQLAlchemy only for a database that exists
    from pxp.storage.schema import schema_state

    try:
        engine = make_engine(url)
    except PxpError as err:
        raise ConfigError(str(err)) from None
    except Exception as err:
        raise ConfigError(f"{shown_url(url)}: {describe(err)}") from None
    try:
        state, revision = schema_state(engine)
    except Exception as err:
        raise ConfigError(f"{shown_url(url)}: {describe(err)}; check that it is running and the URL is right") from None
    finally:
        engine.dispose()
    if state == "foreign":
        raise ConfigError(f"{shown_url(url)} has tables but no pxp schema; pxp does not touch another "
                          "application's database: use an empty one, or `pxp db init` to add pxp's tables")
    if state == "unknown":
        raise ConfigError(str(StoreError(f"{shown_url(url)}: its schema revision {revision!r} is not one of "
                                         "this pxp's (another application's database, or a newer pxp's)")))


def shown_url(url: str) -> str:
    """A database URL as pxp shows it: without its password."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)[:200]


def serving_url(explicit: str | None, environ: Mapping[str, str], secrets: Secrets) -> str:
    """The database the app serves: --db, else PXP_DATABASE_URL (environment, then secrets), else
    the secret database_url, else pxp's setting (./pxp.db)."""
    from pxp.storage.settings import get_settings

    if explicit:
        return explicit
    if "PXP_DATABASE_URL" in environ:  # checked by its declaration (an empty one is refused, not skipped)
        return str(setting_value("PXP_DATABASE_URL", environ))
    for name in ("PXP_DATABASE_URL", "database_url"):
        if isinstance(secrets.values.get(name), str):
            return str(secrets.values[name])
    return get_settings().database_url


def read_metadata(server: str, status: int, content_type: str, body: bytes) -> dict[str, Any]:
    """What an OpenID provider's metadata URL answered (OpenID Connect Discovery 1.0, section 3: a JSON object with
    `issuer` and `authorization_endpoint`), or ReplyError naming the URL, the status and what was wrong."""
    from pxp.llm.errors import ReplyError, read_json, reply_line

    data = read_json(server, status, content_type, body)
    missing = [k for k in ("issuer", "authorization_endpoint") if not isinstance(data, dict)
               or not isinstance(data.get(k), str) or not data[k].strip()]
    if missing:
        raise ReplyError(reply_line(server, status, content_type, body, "not an OpenID provider's metadata (no "
                                    + " or ".join(f"`{k}`" for k in missing) + ")"), status=status)
    return dict(data)


def team_size(url: str) -> dict[str, int]:
    """How many entries of each role the database's team table holds ({} for no table, or no database yet)."""
    from pxp.storage.urls import sqlite_file

    path = sqlite_file(url)
    if path is not None and not path.exists():
        return {}
    from pxp.storage.core import make_engine  # SQLAlchemy only for a database that exists

    engine = make_engine(url)
    try:
        return roles_held(engine)
    finally:
        engine.dispose()


def roles_held(engine: Engine) -> dict[str, int]:
    """How many team entries (emails and groups) hold each role; {} when the database has no team table yet."""
    from sqlalchemy import inspect, text

    with engine.connect() as conn:
        if not inspect(conn).has_table("team_member"):
            return {}
        rows = conn.execute(text("SELECT role, count(*) FROM team_member GROUP BY role")).all()
    return {str(role): int(n) for role, n in rows}


def team_line(roles: Mapping[str, int]) -> str:
    """'a team of 2 (1 admin, 1 researcher)'."""
    order = ("admin", "researcher", "annotator")
    ranked = sorted(roles.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else 3, kv[0]))
    parts = ", ".join(f"{n} {role}" for role, n in ranked)
    return f"a team of {sum(roles.values())} ({parts})"


def check_login_follows_team(url: str, roles: Mapping[str, int], secrets: Secrets) -> None:
    """A database with a team is served only with login: `ConfigError` when it has one and [auth] is off."""
    if roles and not secrets.login_on:
        raise ConfigError(f"{shown_url(url)} has {team_line(roles)} but login is off: configure [auth] in the "
                          "secrets (docs/operations.md, Login and roles); pxp never serves a team's study without "
                          "login")


def check_serving(files: Iterable[str | Path], explicit: str | None, environ: Mapping[str, str], *,
                  named: bool = False) -> Secrets:
    """Everything the app needs before it serves (the secrets files, the database, login for a team);
    `ConfigError` otherwise."""
    secrets = read_secrets(files, named=named)
    url = serving_url(explicit, environ, secrets)
    check_database(url)
    try:
        roles = team_size(url)
    except Exception as err:
        from pxp.storage.faults import describe

        raise ConfigError(f"{shown_url(url)}: {describe(err)}") from None
    check_login_follows_team(url, roles, secrets)
    return secrets
