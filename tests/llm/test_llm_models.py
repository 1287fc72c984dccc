"""Defaults are current models; a deprecated or unknown model is warned about
before a run starts (pxp run, Settings), from the installed SDK's deprecation table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from pxp.app.router import VIEWS
from pxp.cli.main import app
from pxp.llm.models import DEFAULT_CHECKERS, DEFAULT_MODELS, deprecation, model_warning
from pxp.llm.pricing import CHECKED, price_of
from tests.app.test_app import APP, plain
from tests.cli.test_llm_cli import _drug_first
from tests.factories import make_drug
from tests.llm_server import FakeLLM, adopting_model

cli = CliRunner()


def test_defaults_are_current_and_priced() -> None:
    for table in (DEFAULT_MODELS, DEFAULT_CHECKERS):
        for provider, model in table.items():
            assert deprecation(provider, model) is None
            assert price_of(provider, model) is not None
    assert CHECKED.startswith("20")


def test_deprecated_and_unknown_models_are_warned() -> None:
    w = model_warning("anthropic:claude-sonnet-4-5")
    assert w is not None and "deprecated (end of life November 30th, 2026)" in w
    assert "anthropic:claude-sonnet-4-6" in w
    assert model_warning("anthropic:claude-sonnet-4-6") is None
    assert model_warning("simulated") is None
    u = model_warning("openai:llama3.1", served=["qwen2.5", "mistral"])
    assert u is not None and "does not list this model" in u and "qwen2.5" in u
    assert model_warning("openai:qwen2.5", served=["qwen2.5"]) is None


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(adopting_model(_drug_first)) as s:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "0")
        yield s


def test_pxp_run_prints_one_warning_line_before_the_run(engine: Engine, db_url: str, server: FakeLLM) -> None:
    make_drug(engine, "drug")
    r = cli.invoke(app, ["--db", db_url, "run", "--dataset", "drug", "--machine", "anthropic:claude-sonnet-4-5",
                         "--checker", "anthropic:claude-haiku-4-5", "--no-progress", "--reps", "1"])
    assert r.exit_code == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert len(lines) == 1 and "claude-sonnet-4-5 is deprecated" in lines[0]


def test_settings_warns_about_a_deprecated_model(server: FakeLLM, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PXP_DATABASE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    server.models = ["claude-sonnet-4-5", "claude-sonnet-4-6"]
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(str(VIEWS / "settings.py")).run()
    at.text_input(key="settings_generator").input("anthropic:claude-sonnet-4-5")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception
    assert [plain(w.value) for w in at.warning][:1] == [
        "anthropic:claude-sonnet-4-5 is deprecated (end of life November 30th, 2026); use a current model "
        "such as anthropic:claude-sonnet-4-6"]


def test_served_models_through_both_sdks(server: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    from pxp.llm.models import model_checks, served_models

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server.models = ["claude-sonnet-4-6", "qwen2.5"]
    assert served_models("anthropic:claude-sonnet-4-6") == ["claude-sonnet-4-6", "qwen2.5"]
    assert served_models("openai:qwen2.5", server.openai_url) == ["claude-sonnet-4-6", "qwen2.5"]
    warnings = model_checks(["openai:llama3.1", "anthropic:claude-sonnet-4-6"], server.openai_url)
    assert len(warnings) == 1 and "openai:llama3.1: the server does not list this model" in warnings[0]
    assert "qwen2.5" in warnings[0]


def test_settings_warns_about_a_model_the_server_does_not_serve(
    server: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PXP_DATABASE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.models = ["qwen2.5", "llava"]
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(str(VIEWS / "settings.py")).run()
    at.text_input(key="settings_generator").input("openai:llama3.1")
    at.text_input(key="settings_base_url").input(server.openai_url)
    at.get("form_submit_button")[0].click().run()
    assert not at.exception
    warnings = [plain(w.value) for w in at.warning]
    assert any("does not list this model (it serves llava, qwen2.5)" in w for w in warnings), warnings


def test_experiments_launch_warns_about_a_deprecated_model(
    server: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pxp.storage.store import get_engine

    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    make_drug(get_engine(url), "drug")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(str(VIEWS / "experiments.py")).run()
    at.text_input(key="experiments_machine").input("anthropic:claude-sonnet-4-5")
    at.toggle(key="experiments_learn").set_value(False)
    next(b for b in at.get("form_submit_button") if "start" in str(b.label)).click().run()
    assert not at.exception
    assert any("claude-sonnet-4-5 is deprecated" in plain(w.value) for w in at.warning)
    # a priced run waits for its second click, the warning beside it (docs/research.md, Cost estimate)
    next(b for b in at.button if b.key == "experiments_confirm").click().run()
    assert not at.exception
    from sqlmodel import select

    from pxp.running.workers import pool as workers
    from pxp.storage.store import db_session
    from pxp.storage.tables import Experiment

    with db_session(get_engine(url)) as db:
        exp = db.exec(select(Experiment)).one()
    workers.wait(get_engine(url), exp.id or 0, timeout=60)
