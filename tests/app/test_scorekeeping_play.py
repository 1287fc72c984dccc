"""Play as the answerer (docs/research.md, Scorekeeping game) through streamlit.testing.v1.AppTest: a whole human
episode reply
by reply onto the leaderboard, a reload mid-episode, a reply from a stale tab, an aborted episode, and
names shown as text. The replies a careful player gives come from the simulated agent at accuracy 1,
so the episode is perfect and its scores are known."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from pxp.app.router import VIEWS as VIEW_DIR
from pxp.protocols.scorekeeping.scores import QUALITY_STD
from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer
from pxp.running.scorekeeping import play
from pxp.storage.scorekeeping import SkEpisode, SkPlay
from pxp.storage.store import get_engine
from tests.app.test_scorekeeping_page import cli
from tests.factories import make_rad

PAGE = str(VIEW_DIR / "scorekeeping.py")
TAB = "Play as the answerer"
EVE = "**Eve** <img src=x onerror=alert(1)>"
CAREFUL = SimulatedAnswerer(probe_accuracy=1.0, slot_accuracy=1.0, format_error_rate=0.0)


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    engine = get_engine(url)
    make_rad(engine)  # a dataset, so the app does not load its demo data
    yield url, engine


def open_page(player: str | None = None) -> AppTest:
    """A fresh browser session on the play tab (a reload: nothing but the URL is kept)."""
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["sk_tab"] = TAB
    if player is not None:
        at.query_params["player"] = player
    at.run()
    ok(at)
    return at


def plain(markdown: str) -> str:
    """The text an escaped markdown line shows."""
    return re.sub(r"\\(.)", r"\1", markdown)


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def type_reply(at: AppTest, step: int, text: str) -> None:
    at.text_input(key=f"sk_play_reply_{step}").input(text)
    at.button(key=f"sk_play_send_{step}").click().run()
    ok(at)


def careful_reply(at: AppTest, engine: Engine, model: str) -> None:
    """Give the right reply to what the page shows: Yes/No buttons for probes, typed answers."""
    p = play.current(engine, model)
    assert p is not None
    shown = [t.value for t in at.text]
    assert shown[-1] == p.request.messages[-1]["content"]  # exactly the prompt a model gets, last
    reply = CAREFUL(p.request)
    if p.request.kind == "probe":
        at.button(key=f"sk_play_{'yes' if 'Yes' in reply else 'no'}_{p.step}").click().run()
        ok(at)
    else:
        type_reply(at, p.step, reply)


def test_a_whole_episode_reply_by_reply_onto_the_leaderboard(app_db: tuple[str, Engine]) -> None:
    url, engine = app_db
    at = open_page()
    assert "play one yourself" in at.info[0].value
    at.text_input(key="sk_play_name").input("Ann").run()
    ok(at)
    assert at.query_params["player"] == "Ann"  # the name survives a reload in the URL
    at.button(key="sk_play_start").click().run()
    ok(at)
    model = "human:Ann"
    p = play.current(engine, model)
    assert p is not None and p.request.kind == "probe" and p.step == 0
    # the dialogue (the game master's prompt and "Ok.") apart from the private probe
    texts = [t.value for t in at.text]
    assert texts[0] == p.request.messages[0]["content"] and texts[1] == "Ok."
    assert at.text_input(key="sk_play_reply_0").value == "ASIDE: "
    # the facts stay in view beside the dialogue; the person's own turns carry a person's avatar, not a robot
    facts = plain(next(m.value for m in at.markdown if "Your facts" in m.value))
    assert all(f"{k}: **{v}**" in facts for k, v in p.request.instance.slots.items())
    assert [c.avatar for c in at.get("chat_message")] == [":material/flag:", ":material/person:"]
    # a probe reply without its tag is invalid: asked again with the rephrasing, as for a model, and a note says so
    type_reply(at, 0, "no")
    p = play.current(engine, model)
    assert p is not None and p.request.attempt == 2 and p.replies == ["no"]
    assert "Please answer this question carefully." in at.text[-1].value
    assert plain(at.warning[0].value) == ("Not recorded: it does not start with ASIDE:. "
                                          "The private question is asked again.")
    careful_reply(at, engine, model)  # a valid private answer: a short note
    assert plain(at.info[0].value) in {f"Private answer recorded: {a}. The travel agent does not see it."
                                       for a in ("yes", "no")}
    replies = 2
    while play.current(engine, model) is not None:
        careful_reply(at, engine, model)
        replies += 1
        assert replies < 60
    assert replies == 1 + 30 + 5  # 6 probing rounds of 5 probes, 5 answers
    assert plain(at.success[0].value) == (f"Episode {model}/travel-booking/episode_0 finished and stored; "
                                          "it is on the leaderboard.")
    # the episode's scores, as clembench computes them: every slot filled, every probe right
    assert [(m.label, m.value) for m in at.metric] == [("Slot filling", "100%"), ("Probing accuracy", "100%"),
                                                      ("Main Score", "100.0")]
    assert at.button(key="sk_play_start")  # the next episode can begin
    with engine.connect() as c:
        ep = c.execute(select(SkEpisode.__table__)).mappings().one()  # type: ignore[attr-defined]
        left = c.execute(select(SkPlay.__table__)).all()  # type: ignore[attr-defined]
    assert not left  # the half-played row is gone once the episode is stored
    assert (ep["model"], ep["aborted"], ep["main_score"]) == (model, False, 100.0)
    assert ep["interactions"]["players"]["Player 1"] == f"Answerer: {model}"
    assert ep["interactions"]["probes"][0][0]["tries"] == 2
    board = at.dataframe[0].value
    assert list(board["model"]) == [model] and list(board["episodes"]) == [1]
    rep = json.loads(cli(url, "report", "--name", play.HUMAN_GAME, "--format", "json"))
    assert board["Quality Score"][0] == "100.00" and rep["models"][model]["Quality Score"] == 100.0
    assert board[QUALITY_STD][0] == "—"  # one episode: no standard deviation, and no raw "None"
    assert rep["models"][model]["% Played"] == 100.0


def test_a_reload_mid_episode_resumes_it(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    at = open_page("Bo")
    at.button(key="sk_play_start").click().run()
    for _ in range(7):  # round 0 and the first answer
        careful_reply(at, engine, "human:Bo")
    before = play.current(engine, "human:Bo")
    assert before is not None and before.step == 7 and before.request.kind == "probe"
    shown = [t.value for t in at.text]
    again = open_page("Bo")  # a new session: only the URL (player, tab) is kept
    assert again.text_input(key="sk_play_name").value == "Bo"
    assert [t.value for t in again.text] == shown  # the same dialogue and the same probe
    assert again.text_input(key="sk_play_reply_7").value == "ASIDE: "
    careful_reply(again, engine, "human:Bo")
    after = play.current(engine, "human:Bo")
    assert after is not None and after.step == 8 and after.replies[:7] == before.replies
    # typing the name in a session without it in the URL finds the same episode
    fresh = open_page()
    fresh.text_input(key="sk_play_name").input("Bo").run()
    ok(fresh)
    assert fresh.text_input(key="sk_play_reply_8")


def test_a_reply_from_a_stale_tab_is_refused(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    one = open_page("Cy")
    one.button(key="sk_play_start").click().run()
    two = open_page("Cy")
    two.button(key="sk_play_no_0").click().run()
    ok(two)
    one.button(key="sk_play_yes_0").click().run()  # this tab still shows step 0
    ok(one)
    assert "moved on" in plain(one.error[0].value)
    p = play.current(engine, "human:Cy")
    assert p is not None and p.replies == ["ASIDE: no"]
    assert one.button(key="sk_play_yes_1")  # and it now shows where the episode stands


def test_an_answer_without_its_tag_ends_the_episode_aborted(app_db: tuple[str, Engine]) -> None:
    url, engine = app_db
    at = open_page("Di")
    at.button(key="sk_play_start").click().run()
    for _ in range(5):
        careful_reply(at, engine, "human:Di")
    p = play.current(engine, "human:Di")
    assert p is not None and p.request.kind == "answer"
    assert at.text_input(key="sk_play_reply_5").value == "ANSWER: "
    type_reply(at, 5, "Glasgow, I think")  # no ANSWER: tag: violated, the episode is over
    assert play.current(engine, "human:Di") is None
    why = plain(at.warning[0].value)
    assert why.startswith("Episode human:Di/travel-booking/episode_0 was aborted: reply 6 ('Glasgow, I think') "
                          "broke the answer rule (it does not start with ANSWER:)"), why
    assert [m.value for m in at.metric] == ["—", "—", "—"]  # an aborted episode is not scored
    rep = json.loads(cli(url, "report", "--name", play.HUMAN_GAME, "--format", "json"))
    assert rep["models"]["human:Di"]["% Played"] == 0.0
    assert rep["episodes"]["human:Di/travel-booking/episode_0"]["Aborted"] == 1


def test_names_are_checked_and_shown_as_text(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    at = open_page()
    at.text_input(key="sk_play_name").input("a/b").run()
    ok(at)
    assert "without '/'" in plain(at.error[0].value) and not at.button
    at.text_input(key="sk_play_name").input(EVE).run()
    ok(at)
    assert r"\*\*Eve\*\* \<img src\=x onerror\=alert\(1\)\>" in at.caption[-1].value  # markdown-escaped, never HTML
    at.button(key="sk_play_start").click().run()
    ok(at)
    assert play.current(engine, "human:" + EVE) is not None
    at.button(key="sk_play_abandon").click().run()
    ok(at)
    assert play.current(engine, "human:" + EVE) is None and "nothing was stored" in plain(at.success[0].value)


def test_the_play_store_on_sqlite_and_postgresql(any_engine: Engine) -> None:
    """The page's store (pxp.running.scorekeeping.play) on both databases: nothing is created by reading,
    a stale step is refused, the last reply stores the episode like a model's and drops the row."""
    model = play.human_model("  Fay   Lu ")
    assert model == "human:Fay Lu"
    assert play.current(any_engine, model) is None and play.progress(any_engine, model) == (0, 20)
    assert play.human_game(any_engine, create=False)[0] is None  # reading created no game
    play.human_game(any_engine)
    p = play.start(any_engine, model)
    assert p is not None and play.start(any_engine, model) == p  # started once
    with pytest.raises(play.PlayError, match="moved on"):
        play.reply(any_engine, model, "ASIDE: no", p.step + 1)
    out: play.Play | play.Finished = p
    while isinstance(out, play.Play):
        out = play.reply(any_engine, model, CAREFUL(out.request), out.step)
    assert out.key == f"{model}/travel-booking/episode_0" and out.scores["Main Score"] == 100.0
    assert play.progress(any_engine, model) == (1, 20) and play.current(any_engine, model) is None
    nxt = play.start(any_engine, model)
    assert nxt is not None and (nxt.experiment, nxt.episode) == ("travel-booking", 1)
