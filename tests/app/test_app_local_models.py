"""The app with a local model (docs/research.md, Local models): Settings lists the server's models, Sessions shows
the model's thinking folded beside its call and says which calls had no usage."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.tables import Session
from tests.app import test_app
from tests.app.test_app import new_app, ok, plain, texts
from tests.factories import make_text
from tests.llm_server import THINKING, FakeLLM, adopting_model, answer

app_db = test_app.app_db  # the app's fixture: a fresh SQLite database, no API keys


def test_settings_lists_the_models_of_the_server(app_db: tuple[str, Engine]) -> None:
    with FakeLLM() as server:
        server.models = ["qwen3:8b", "llama3.1:8b"]
        at = new_app("settings")
        at.text_input(key="settings_generator").input("openai:qwen3:8b")
        at.text_input(key="settings_base_url").input(server.openai_url)
        at.get("form_submit_button")[0].click().run()
        ok(at).run()  # the saved base URL offers its list
        at.button(key="settings_list_models").click().run()
        ok(at)
        shown = at.dataframe[-1].value
        assert list(shown["model"]) == ["llama3.1:8b", "qwen3:8b"] and list(shown["the generator"]) == ["", "yes"]
        server.models = ["llama3.1:8b"]
        at.button(key="settings_list_models").click().run()
        assert "openai:qwen3:8b is not among the 1 model(s)" in plain(texts(at))
    at.button(key="settings_list_models").click().run()  # the server is gone: one line
    assert any("cannot connect to" in e.value for e in ok(at).error)


def test_sessions_shows_the_thinking_folded_and_the_calls_without_usage(
    app_db: tuple[str, Engine], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, engine = app_db
    make_text(engine)
    with FakeLLM(adopting_model(lambda req: answer("Pneumonia", "air bronchograms in the left lower zone"))) as server:
        server.mode = "reasoning_content+no-usage"
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        exp = create_experiment(engine, RunConfig(dataset="toy-text", machine="openai:qwen3:8b", checker="lexical",
                                                  reps=1), name="local")
        assert run_experiment(engine, exp.id or 0).status == "finished"
    with DB(engine) as db:
        sid = db.exec(select(Session.id).order_by(col(Session.id))).first()
    at = new_app("sessions")
    at.selectbox(key="sessions_open").set_value(sid).run()
    ok(at)
    assert at.expander and at.expander[0].label.startswith("Thinking behind message 1 (ask, attempt 1)")
    assert THINKING in [t.value for t in at.expander[0].text]
    assert "call(s) had no usage (unknown tokens, cost —)" in plain(texts(at))


def test_what_was_done_to_fit_a_call_is_said_in_words() -> None:
    from pxp.app.data import fitted

    detail = {"image": {"sent": [672, 560], "source": [2400, 2000], "limit": "max_image_px 672"},
              "context_shortened": {"carried_sessions": 1, "messages": 2}}
    assert fitted(detail) == ("image 672×560 of 2400×2000 (max_image_px 672); context without 1 carried session(s) "
                              "and 2 message(s)")
    assert fitted(None) == fitted({"image": {"sent": [64, 64], "source": [64, 64], "limit": "openai 2048 px"}}) == ""
