"""Every setting is checked where it comes in (docs/operations.md, Settings): walked from its one declaration
(pxp.protocols.settings), each environment variable gets a wrong type, an out-of-range value and an empty value,
for three commands each: one that uses it refuses in one line naming the variable and the value, before anything
is opened or written; `pxp doctor` shows it as ✗; a command that does not use it is not stopped by it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pxp.cli.app import doctor_checks
from pxp.cli.main import app
from pxp.protocols.settings import DECLARED, ENV, Setting, shown, table
from pxp.storage.store import forget_engine, get_engine
from tests.factories import make_drug

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
ENV_SETTINGS = [s for s in DECLARED if ENV in s.sources]


def bad_values(s: Setting) -> list[tuple[str, str]]:
    """(what, value): a wrong type, a value out of range, an empty value."""
    if s.kind in ("int", "float"):
        low = int(s.low or 0)
        return [("type", "abc"), ("range", str(low if s.above else low - 1)), ("empty", "")]
    wrong = {"flag": ("maybe", "2"), "url": ("not a url", "ftp://host.example/v1"),
             "database": ("pxp.db", "://nothing"), "spec": ("42", "mistral:large")}[s.kind]
    return [("type", wrong[0]), ("range", wrong[1]), ("empty", "")]


def digest(folder: Path) -> dict[str, str]:
    """Every file of the folder with its content's hash: a refused command changes nothing."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a SQLite database holding one dataset (checkpointed: no -wal beside it)."""
    folder = tmp_path_factory.mktemp("settings")
    url = f"sqlite:///{folder / 'pxp.db'}"
    make_drug(get_engine(url), "drug")
    forget_engine(url)
    return folder


def commands(s: Setting, url: str) -> list[tuple[str, list[str]]]:
    """Three commands for a setting: (expected, arguments); `refused` by one that uses it, `doctor`, `runs`
    for one that does not use it (every command uses PXP_DEBUG, so it is two refusals)."""
    instances = ["scorekeeping", "instances", "--n", "1"]
    validate = ["validate", "--db", url]
    user = {"cli": ["validate", "--db", url],
            "database": ["demo"],  # no --db: PXP_DATABASE_URL names the database
            "models": ["run", "--db", url, "--dataset", "drug", "--machine", "openai:m", "--name", "x"],
            "runs": ["worker", "--db", url],
            "app": ["app", "--db", url, "--secrets.files", "/nonexistent/secrets.toml"]}[s.uses]
    other = ("refused", instances) if s.uses == "cli" else ("runs", instances if s.uses == "database" else validate)
    return [("refused", user), ("doctor", ["doctor", "--db", url]), other]


CASES = [pytest.param(s, what, raw, i, id=f"{s.name}-{what}-{i}")
         for s in ENV_SETTINGS for what, raw in bad_values(s) for i in range(3)]


@pytest.mark.parametrize(("setting", "what", "raw", "i"), CASES)
def test_a_bad_setting_stops_what_uses_it_and_only_that(stored: Path, monkeypatch: pytest.MonkeyPatch,
                                                        setting: Setting, what: str, raw: str, i: int) -> None:
    for other in ENV_SETTINGS:
        monkeypatch.delenv(other.name, raising=False)
    monkeypatch.chdir(stored)
    monkeypatch.setenv(setting.name, raw)
    expected, args = commands(setting, f"sqlite:///{stored / 'pxp.db'}")[i]
    before = digest(stored)
    res: Any = runner.invoke(app, args)
    out = res.stdout + res.stderr
    named = f"{setting.name} is set but empty" if what == "empty" else f"{setting.name} is {shown(setting, raw)}"
    assert "Traceback" not in out, out
    if expected == "refused":
        assert res.exit_code == 1, out
        assert out.strip().splitlines() == [out.strip()] and out.startswith(f"error: {named}: "), out
        assert "allowed is" in out or "or give" in out, out
        assert digest(stored) == before  # nothing opened, created or written
    elif expected == "doctor":
        assert res.exit_code == 1, out
        assert f"✗ setting: {named}" in res.stdout, out
    else:
        assert res.exit_code == 0, out
        assert setting.name not in out


def test_the_docs_list_the_declaration() -> None:
    """docs/operations.md's Settings table is the declaration's (regenerate: python -c 'from
    pxp.protocols.settings import table; print(table())')."""
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- settings: begin -->\n(.*?)\n<!-- settings: end -->", doc, re.DOTALL)
    assert found is not None and found.group(1) == table()


def test_a_bad_secret_stops_the_app_and_shows_in_doctor(stored: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = stored.parent / "bad-secrets" / "secrets.toml"
    secrets.parent.mkdir(exist_ok=True)
    secrets.write_text('PXP_MAX_LOGIN_HOURS = "abc"\n', encoding="utf-8")
    monkeypatch.chdir(stored)
    before = digest(stored)
    res: Any = runner.invoke(app, ["app", "--db", f"sqlite:///{stored / 'pxp.db'}", "--secrets.files", str(secrets)])
    line = f"PXP_MAX_LOGIN_HOURS (Streamlit secret in {secrets}) is 'abc': allowed is a number above 0"
    assert res.exit_code == 1 and (res.stdout + res.stderr).startswith(f"error: {line}"), res.stdout + res.stderr
    assert digest(stored) == before
    checks = doctor_checks([str(secrets)], f"sqlite:///{stored / 'pxp.db'}", {}, named=True)  # `pxp doctor`'s
    assert [ok for ok, said in checks if said.startswith(f"configuration: {line}")] == [False], checks
