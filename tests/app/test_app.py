"""The Streamlit app through streamlit.testing.v1.AppTest: every page, and the Annotate
flow of the human in the browser against the simulated agent (DESIGN §1)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from pxp.agents.base import AgentBase, Answer, Query
from pxp.app import PAGE
from pxp.app.router import VIEWS
from pxp.data.pixels import read_header
from pxp.protocols.pxp.rules import Msg, Sender, Tag, conformance
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import machine_step
from pxp.storage.store import get_engine
from pxp.storage.tables import AppSetting, Experiment, Message, Session
from tests.app.test_app_imports import Up
from tests.factories import DRUGS, make_drug, make_rad, make_rad_images
from tests.study_sample import Study

APP = str(PAGE)  # the page script the server runs for every visit
XSS = (
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> '
    "[click](http://evil.example) ![i](http://evil.example/i.png) http://evil.example"
)


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    engine = get_engine(url)
    yield url, engine


class Says(AgentBase):
    """A scripted machine: its message is the given answer, stored through the engine's step."""

    label = "scripted"

    def __init__(self, prediction: str, explanation: str) -> None:
        self.answer = Answer(prediction, explanation)

    def ask(self, q: Query) -> Answer:
        return self.answer

    def match(self, y1: str, y2: str, q: Query) -> bool:
        return y1 == y2

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        return e1 == e2


def new_app(page: str = "home") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(str(VIEWS / f"{page}.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def by_suffix(widgets: Any, suffix: str) -> Any:
    found = [w for w in widgets if w.key and str(w.key).endswith(suffix)]
    assert found, f"no widget with key ending {suffix!r}"
    return found[-1]


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def plain(shown: str) -> str:
    """The text a reader sees in escaped Markdown (pxp.app.ui.escape_md undone)."""
    return re.sub(r"\\(.)", r"\1", shown.replace("\u2060", ""))


def md_tables(at: AppTest) -> list[pd.DataFrame]:
    """The small tables drawn as Markdown (pxp.app.ui.small_table) as a reader sees them: cells unescaped,
    right-aligned (numeric) columns read back as numbers."""
    found = []
    for m in at.markdown:
        lines = str(m.value).split("\n")
        if len(lines) < 2 or not lines[0].startswith("| ") or not re.fullmatch(r"\|(?:(?:---:|:---)\|)+", lines[1]):
            continue
        rows = [[plain(c) for c in line[2:-2].split(" | ")] for line in [lines[0], *lines[2:]]]
        df = pd.DataFrame(rows[1:], columns=rows[0])
        for col, align in zip(df.columns, lines[1].strip("|").split("|"), strict=True):
            if align == "---:":
                df[col] = pd.to_numeric(df[col])
        found.append(df)
    return found


def vega_charts(at: AppTest) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Each Vega-Lite chart on the page: its spec and its data (Streamlit ships the data apart, as Arrow)."""
    import pyarrow as pa

    return [(json.loads(c.proto.spec), pa.ipc.open_stream(c.proto.data.data).read_pandas())
            for c in at.get("vega_lite_chart")]


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [s.value for s in at.success]
    parts += [c.value for c in at.caption] + [w.value for w in at.warning] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


def login(at: AppTest, dataset: str, name: str = "Dr Rao") -> AppTest:
    at.sidebar.text_input(key="annotate_name").input(name).run()
    ok(at)
    at.sidebar.selectbox(key="annotate_dataset").set_value(dataset).run()
    return ok(at)


def current(engine: Engine, annotator: str = "Dr Rao") -> tuple[int, list[Message]]:
    with DB(engine) as db:
        from pxp.storage.tables import Annotator

        a = db.exec(select(Annotator).where(Annotator.name == annotator)).one()
        s = db.exec(select(Session).where(Session.annotator_id == a.id, Session.status == "open")).first()
        assert s is not None and s.id is not None
        msgs = list(db.exec(select(Message).where(Message.session_id == s.id).order_by(Message.j)).all())
        return s.id, msgs


def done_count(at: AppTest) -> str:
    """The sidebar's "N of M cases done" line."""
    bars = [str(p.proto.text) for p in at.sidebar.get("progress")]
    assert len(bars) == 1, bars
    return bars[0]


def finished_sessions(engine: Engine) -> list[Session]:
    with DB(engine) as db:
        return list(db.exec(select(Session).where(Session.status == "finished")).all())


def all_msgs(engine: Engine, sid: int) -> list[Msg]:
    from pxp.storage.store import session_msgs

    with DB(engine) as db:
        return session_msgs(db, session_id=sid)


# --- every page renders --------------------------------------------------------------------


@pytest.mark.parametrize("page", ["home", "annotate", "sessions", "experiments", "datasets", "settings"])
def test_every_page_renders(app_db: tuple[str, Engine], page: str) -> None:
    _, engine = app_db
    make_rad(engine)
    make_drug(engine)
    at = new_app(page)
    assert at.title, "each page has a title"


def test_first_start_loads_the_demo(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    at = new_app("home")
    from pxp.app.data import datasets_table

    names = set(datasets_table(engine)["name"])
    assert {"demo-rad", "demo-drug"} <= names
    assert "Simulated agent" in texts(at)


@pytest.mark.long
def test_first_start_makes_the_demo_films_in_the_background(app_db: tuple[str, Engine],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo shows what the viewer is for: 2048-px 12-bit films with the Lung, Soft tissue and Bone windows
    follow the demo on first start (docs/annotating.md, Pages), while the app already serves."""
    _, engine = app_db
    monkeypatch.setenv("PXP_DEMO_FILMS", "1")
    at = AppTest.from_file(APP, default_timeout=60).run()
    notice = " ".join(str(t.value) for t in at.toast).replace("\\", "")  # as shown: markdown escapes removed
    assert "demo-rad-films" in notice and "being made" in notice, notice
    from pxp.app.data import datasets_table

    deadline = time.monotonic() + 180
    while "demo-rad-films" not in set(datasets_table(engine)["name"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    at = login(new_app("annotate"), "demo-rad-films")
    viewers = at.get("bidi_component")  # the film's low-resolution copy first (docs/annotating.md, Pages), the film
    assert len(viewers) == 2 and read_header(viewers[0].proto.bytes)["w"] <= 256
    head = read_header(viewers[-1].proto.bytes)
    assert head["w"] == head["h"] == 2048
    assert {"Lung", "Soft tissue", "Bone"} <= {p["name"] for p in head["presets"]}


# --- Annotate ------------------------------------------------------------------------------


def test_annotate_a_rad_session_to_the_end_by_the_rule(app_db: tuple[str, Engine]) -> None:
    """The expert answers the two questions each turn; tags follow the AGENT rule."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    assert "Simulated agent" in texts(at)
    sid, msgs = current(engine)
    assert [m.tag for m in msgs] == ["INIT"], "the machine opens with INIT"
    for _ in range(10):
        if finished_sessions(engine):
            break
        by_suffix(at.button, "_match_no").click().run()
        by_suffix(at.button, "_agree_no").click().run()
        ok(at)
        # the answer shows as chosen, unless the content decides the fact: then the fact recorded shows
        same = by_suffix(at.selectbox, "_pred").value == current(engine)[1][-1].prediction
        shown, other = ("_match_yes", "_match_no") if same else ("_match_no", "_match_yes")
        assert by_suffix(at.button, shown).proto.type == "primary", "the recorded answer shows as chosen"
        assert by_suffix(at.button, other).proto.type == "secondary"
        by_suffix(at.selectbox, "_pred").set_value("Pneumothorax")
        by_suffix(at.text_area, "_expl").input("A visceral pleural line at the apex with no markings beyond.")
        at.run()
        ok(at)
        assert "Your message will be tagged" in texts(at)
        by_suffix(at.button, "_send").click().run()
        ok(at)
    done = finished_sessions(engine)
    assert len(done) == 1 and done[0].id == sid
    msgs = all_msgs(engine, sid)
    assert not conformance(msgs, done[0].n, done[0].k)
    assert msgs[1].tag is Tag.REFUTE and msgs[1].sender is Sender.HUMAN
    page = texts(at)
    assert "is finished" in page and "2-way intelligible — " in page
    # and the next case is on screen
    nxt, nmsgs = current(engine)
    assert nxt != sid and [m.tag for m in nmsgs] == ["INIT"]


def test_the_two_questions_have_keyboard_shortcuts_shown_in_the_ui(app_db: tuple[str, Engine]) -> None:
    """MATCH and AGREE are answered with Alt+5/6 and Alt+7/8 (as the tags with Alt+1–4): the
    buttons carry the shortcuts, the keyboard line lists them, and the answers drive the tag."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    keys = {b.key.rsplit("_", 2)[-2] + "_" + b.key.rsplit("_", 1)[-1]: b.proto.shortcut
            for b in at.button if b.key.endswith(("_match_yes", "_match_no", "_agree_yes", "_agree_no"))}
    assert keys == {"match_yes": "alt+5", "match_no": "alt+6", "agree_yes": "alt+7", "agree_no": "alt+8"}
    hint = next(c.value for c in at.caption if c.value.startswith("Keyboard:"))
    assert "prediction matches Alt+5 Yes / Alt+6 No" in hint and "explanation agrees Alt+7 Yes / Alt+8 No" in hint
    assert "Answer the questions above" in texts(at)
    sid, msgs = current(engine)
    by_suffix(at.selectbox, "_pred").set_value(msgs[0].prediction)
    by_suffix(at.text_area, "_expl").input(msgs[0].explanation)
    by_suffix(at.button, "_match_yes").click().run()
    by_suffix(at.button, "_agree_yes").click().run()
    ok(at)
    assert "Your message will be tagged" in texts(at)
    by_suffix(at.button, "_send").click().run()
    ok(at)
    assert all_msgs(engine, sid)[1].tag is Tag.RATIFY, "Yes and Yes: the AGENT rule ratifies"


def test_annotate_a_drug_session_with_chosen_tags(app_db: tuple[str, Engine]) -> None:
    """The chemist types SMILES (validated, canonicalised, drawn) and picks the tag."""
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug")
    sid, msgs = current(engine)
    machine = msgs[0]
    pred = by_suffix(at.text_input, "_pred")
    pred.input("not a smiles((").run()
    ok(at)
    assert "not a valid SMILES" in texts(at)
    # ratify with the machine's own answer: the machine ratifies back and the session stops
    by_suffix(at.text_input, "_pred").input(machine.prediction)
    by_suffix(at.text_area, "_expl").input(machine.explanation)
    at.run()
    ok(at)
    by_suffix(at.button, "_pick_RATIFY").click().run()
    ok(at)
    assert "you chose it" in texts(at)
    by_suffix(at.button, "_send").click().run()
    ok(at)
    msgs = all_msgs(engine, sid)
    assert [m.tag for m in msgs] == [Tag.INIT, Tag.RATIFY, Tag.RATIFY]
    assert (msgs[1].match, msgs[1].agree, msgs[1].changed) == (True, True, False)
    assert "is finished" in texts(at)
    assert done_count(at) == f"1 of {len(DRUGS)} cases done", "the count does not lag"


def test_a_forbidden_tag_is_refused_with_one_line(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, _ = current(engine)
    by_suffix(at.selectbox, "_pred").set_value("Pneumonia")
    by_suffix(at.button, "_pick_REVISE").click().run()
    ok(at)
    assert "REVISE is impossible at message 2" in texts(at)
    by_suffix(at.button, "_send").click().run()
    ok(at)
    assert any("Not sent" in e.value for e in at.error)
    by_suffix(at.button, "_pick_REJECT").click().run()
    assert "REJECT is only allowed after message 3" in texts(at)
    assert len(all_msgs(engine, sid)) == 1, "nothing was stored"


def test_double_submit_stores_each_step_once(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, _ = current(engine)
    by_suffix(at.selectbox, "_pred").set_value("Pneumonia")
    by_suffix(at.text_area, "_expl").input("Patchy consolidation in the right lower zone.")
    by_suffix(at.button, "_pick_REFUTE").click().run()
    by_suffix(at.button, "_send").click()
    # the browser's message for this click, replayed below as a double click would be
    click = at._tree.get_widget_states()
    at.run()
    ok(at)
    after_first = all_msgs(engine, sid)
    assert [m.j for m in after_first] == [1, 2, 3]
    # the same click arriving again, then plain reruns: nothing more is stored
    at._run(click)
    ok(at)
    at._run(click)
    ok(at)
    at.run()
    ok(at)
    assert [m.j for m in all_msgs(engine, sid)] == [1, 2, 3]
    assert (sid, 2) in at.session_state["annotate_sent"]


def test_a_second_annotator_gets_another_case(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    a = login(new_app("annotate"), "toy-rad", name="Dr A")
    b = login(new_app("annotate"), "toy-rad", name="Dr B")
    sa, _ = current(engine, "Dr A")
    sb, _ = current(engine, "Dr B")
    assert sa != sb
    with DB(engine) as db:
        ia = db.get(Session, sa)
        ib = db.get(Session, sb)
        assert ia is not None and ib is not None and ia.instance_id != ib.instance_id
    assert a.session_state["annotate_sid"] == sa and b.session_state["annotate_sid"] == sb


def test_llm_error_shows_one_line_and_retry(app_db: tuple[str, Engine]) -> None:
    """A machine that cannot answer (an LLM with no key) gives a message and Retry, no trace."""
    _, engine = app_db
    make_rad(engine)
    create_live_experiment(engine, dataset="toy-rad", name="live-llm", machine="anthropic:claude-test")
    at = new_app("annotate")
    at.sidebar.text_input(key="annotate_name").input("Dr Rao").run()
    at.sidebar.selectbox(key="annotate_dataset").set_value("toy-rad").run()
    ok(at)
    errors = [e.value for e in at.error]
    assert any("could not answer" in e for e in errors), errors
    assert all("Traceback" not in e for e in errors)
    assert any(b.label == "Retry" for b in at.button)
    by_suffix(at.button, "_retry_" + str(at.session_state["annotate_sid"]) + "_1").click().run()
    ok(at)
    assert any("could not answer" in e.value for e in at.error)


def test_untrusted_text_is_escaped(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    eid = create_live_experiment(engine, dataset="toy-rad", name="live-xss")
    me = ensure_annotator(engine, name="Dr Rao")
    sid = claim_next(engine, experiment_id=eid, annotator_id=me)
    assert sid is not None
    assert machine_step(engine, sid, Says("Pneumonia", XSS)) is not None
    at = new_app("annotate")
    at.sidebar.text_input(key="annotate_name").input("Dr Rao").run()
    at.sidebar.selectbox(key="annotate_dataset").set_value("toy-rad").run()
    at.sidebar.selectbox(key="annotate_experiment_toy-rad").set_value(eid).run()
    ok(at)
    shown = [t.value for t in at.text if "onerror" in t.value]
    assert shown == [XSS], "the payload is shown verbatim, as plain text (st.text)"
    assert not [m.value for m in at.markdown if "onerror" in m.value]
    from pxp.app.ui import escape_md

    wj = "\u2060"
    assert escape_md("a <b> [x](y) http://z www.q a@b.c $x$ :red[t]") == (
        rf"a \<b\> \[x\]\(y\) http\:\/\/{wj}z www\.{wj}q a\@{wj}b\.c \$x\$ \:red\[t\]"
    )
    # javascript: links, Material icons and colour directives, images: every mark escaped
    assert escape_md("[c](javascript:alert(1)) :material/home: :blue-background[b] ![i](x)") == (
        r"\[c\]\(javascript\:alert\(1\)\) \:material\/home\: \:blue\-background\[b\] \!\[i\]\(x\)")


def test_rad_images_zoom_and_synthetic_badge(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad_images(engine, size=(400, 300))
    at = login(new_app("annotate"), "toy-rad-img")
    assert "synthetic" in texts(at)
    # the client-side viewer: the pixel values are the component's data, sent in the page's own
    # session (no media URL); window/level, wheel and drag in the browser, nothing fetched
    [viewer] = at.get("bidi_component")
    assert viewer.proto.bytes.startswith(b"PXPW") and not at.get("imgs")
    assert read_header(viewer.proto.bytes)["w"] == 400
    assert not at.slider  # no server-side window/level or zoom sliders


# --- the other pages ---------------------------------------------------------------------


def test_sessions_page_shows_transcript_and_calls(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, _ = current(engine)
    at = new_app("sessions")
    assert at.dataframe, "a table of sessions"
    at.selectbox(key="sessions_open").set_value(sid).run()
    ok(at)
    page = texts(at)
    assert "Conformant" in page and "message 1" in page
    at.selectbox(key="sessions_status").set_value("finished").run()
    ok(at)
    assert "No session matches" in texts(at)


def test_experiments_page_runs_in_a_background_worker(app_db: tuple[str, Engine]) -> None:
    from pxp.running.workers import pool as workers

    _, engine = app_db
    make_drug(engine)
    at = new_app("experiments")
    at.number_input(key="experiments_reps").set_value(2)
    at.toggle(key="experiments_learn").set_value(False)
    at.text_input(key="experiments_name").input("bg-run")
    submit = [b for b in at.get("form_submit_button") if "start" in str(b.label)]
    submit[0].click().run()
    ok(at)
    with DB(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "bg-run")).one()
    assert workers.wait(engine, exp.id or 0, timeout=60) == 0
    p = workers.progress(engine, exp.id or 0)
    assert p.sessions == 2 * len(DRUGS) and p.done == p.sessions and p.status == "finished"
    at.run()
    ok(at)
    assert "**bg\\-run**" in texts(at)  # the name escaped (ui.escape_md)


def test_worker_cancel_and_resume(app_db: tuple[str, Engine]) -> None:
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.experiments import create_experiment
    from pxp.running.workers import pool as workers

    _, engine = app_db
    make_rad(engine, per_label=4)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", reps=2, simulated={"latency": 0.03}),
                            name="long")
    workers.start(engine, exp.id or 0)
    assert workers.is_running(engine, exp.id or 0)
    deadline = time.monotonic() + 60
    while workers.progress(engine, exp.id or 0).done < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers.cancel(engine, exp.id or 0)
    p = workers.progress(engine, exp.id or 0)
    assert not p.running and p.status == "cancelled" and p.done < p.sessions
    workers.start(engine, exp.id or 0)
    assert workers.wait(engine, exp.id or 0, timeout=120) == 0
    p = workers.progress(engine, exp.id or 0)
    assert p.done == p.sessions and p.status == "finished"
    with DB(engine) as db:
        for s in db.exec(select(Session)).all():
            from pxp.storage.store import session_msgs

            assert not conformance(session_msgs(db, session_id=s.id or 0), s.n, s.k, status=s.status)


def test_datasets_page_imports_and_browses(app_db: tuple[str, Engine], tmp_path: Path) -> None:
    from pxp.app import imports

    _, engine = app_db
    make_drug(engine)

    bad = imports.run_import(engine, "study_drug", Up("x.csv", b"nothing,useful\n1,2\n"))
    assert not bad.ok and bad.messages and all("\n" not in m for m in bad.messages)
    at = new_app("datasets")
    at.selectbox(key="datasets_browse").set_value("toy-drug").run()
    ok(at)
    assert "Reference answer" in texts(at)


def test_zip_members_cannot_escape(tmp_path: Path) -> None:
    import io
    import zipfile

    from pxp.app.imports import stage
    from pxp.data.importers.common import ImportProblems

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../evil.txt", "x")
        zf.writestr("/abs.txt", "x")
        zf.writestr("imgs/ok.png", "x")

    root = tmp_path / "stage"
    root.mkdir()
    with pytest.raises(ImportProblems, match="escapes the zip"):  # refused whole, nothing unpacked
        stage(Up("a.csv", b"a"), [Up("i.zip", buf.getvalue())], root)
    assert not (root / "imgs" / "ok.png").exists()
    assert not (tmp_path / "evil.txt").exists() and not Path("/abs.txt").exists()


def test_settings_saves_prefs_and_never_shows_keys(
    app_db: tuple[str, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, engine = app_db
    make_rad(engine)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-do-not-show-1234")
    from tests.llm_server import FakeLLM

    server = FakeLLM()  # Settings lists the served models: a local server, never the network
    server.models = ["gpt-4o-mini"]
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    at = new_app("settings")
    page = texts(at)
    assert "OPENAI_API_KEY" in page and "sk-test" not in page
    at.text_input(key="settings_generator").input("anthropic")
    at.get("form_submit_button")[0].click().run()
    ok(at)
    assert any("generator: write provider:model" in plain(e.value) for e in at.error)
    at.number_input(key="settings_n").set_value(8)
    at.text_input(key="settings_generator").input("openai:gpt-4o-mini")
    at.get("form_submit_button")[0].click().run()
    ok(at)
    with DB(engine) as db:
        stored = {r.key: r.value for r in db.exec(select(AppSetting)).all()}
    assert stored["n"] == 8 and stored["generator"] == "openai:gpt-4o-mini"
    assert all("sk-test" not in str(v) for v in stored.values())
    assert not at.warning, "the OpenAI key is present"
    at.text_input(key="settings_generator").input("anthropic:claude-sonnet-4-6")
    at.get("form_submit_button")[0].click().run()
    ok(at)
    assert [w.value for w in at.warning] == [
        "Not set: ANTHROPIC_API_KEY. The model cannot answer until the key is in the environment "
        "or Streamlit secrets."]
    server.close()


def test_annotate_with_an_llm_machine_error_then_retry(app_db: tuple[str, Engine]) -> None:
    """An OpenAI-compatible server (local, speaking the wire format) fails, then answers:
    a one-line error and Retry, then the LLM's INIT (its payload shown as text)."""
    from tests.llm_server import FakeLLM, Reply, answer, checker_reply

    _, engine = app_db
    make_rad_images(engine, size=(300, 240))
    with FakeLLM(lambda req: Reply(status=500, error="the model is overloaded")) as llm:
        create_live_experiment(engine, dataset="toy-rad-img", name="live-llm", machine="openai:gpt-test",
                               base_url=llm.openai_url)
        at = login(new_app("annotate"), "toy-rad-img")
        errors = [e.value for e in at.error]
        assert any("could not answer" in e for e in errors), errors
        assert all("\n" not in e and "Traceback" not in e for e in errors)
        assert "Simulated agent" not in texts(at)
        llm.handler = lambda req: checker_reply(req) if req.is_checker else answer("Pneumonia", XSS)
        retry = [b for b in at.button if b.label == "Retry"]
        retry[0].click().run()
        ok(at)
        assert [t.value for t in at.text if "onerror" in t.value] == [XSS]
        assert r"Machine \(openai\:gpt\-test\)" in texts(at)
        sid, msgs = current(engine)
        assert [m.tag for m in msgs] == ["INIT"] and msgs[0].llm_call_id is not None
        by_suffix(at.selectbox, "_pred").set_value("Pneumothorax")
        by_suffix(at.text_area, "_expl").input("A visceral pleural line at the apex.")
        by_suffix(at.button, "_pick_REFUTE").click().run()
        by_suffix(at.button, "_send").click().run()
        ok(at)
        assert [m.j for m in all_msgs(engine, sid)] == [1, 2, 3]


def test_upload_the_study_drug_csv(app_db: tuple[str, Engine], study: Study) -> None:
    from pxp.app import imports

    _, engine = app_db

    retro = Up("retro.csv", study.drug_csv.read_bytes())
    out = imports.run_import(engine, "study_drug", retro, name="study-drug")
    assert out.ok, out.messages
    at = new_app("datasets")
    at.selectbox(key="datasets_browse").set_value("study-drug").run()
    ok(at)
    assert "study\\-drug" in texts(at)


def test_window_level_for_dicom_derived_images(app_db: tuple[str, Engine]) -> None:
    """The viewer gets the pixel values in the DICOM units and the stored window as its default; the
    window is changed in the browser, so there is no server-side slider and no rerun per change."""
    from pxp.storage.tables import Instance

    _, engine = app_db
    make_rad_images(engine, size=(300, 240), labels=["Pneumonia", "Atelectasis"])
    with DB(engine) as db:
        for inst in db.exec(select(Instance)).all():
            inst.meta = {"window": {"center": 40.0, "width": 400.0, "raw_min": -1000.0, "raw_max": 1000.0}}
            db.add(inst)
        db.commit()
    at = login(new_app("annotate"), "toy-rad-img")
    head = read_header(at.get("bidi_component")[0].proto.bytes)
    assert (head["center"], head["width"]) == (40.0, 400.0)
    assert head["presets"][0] == {"name": "Default", "center": 40.0, "width": 400.0}
    assert not at.slider


def test_window_level_for_every_radiograph(app_db: tuple[str, Engine]) -> None:
    """A plain PNG radiograph (no DICOM window) is windowed too: its grey values, shown as stored."""
    _, engine = app_db
    make_rad_images(engine, size=(300, 240), labels=["Pneumonia", "Atelectasis"])
    at = login(new_app("annotate"), "toy-rad-img")
    head = read_header(at.get("bidi_component")[0].proto.bytes)
    assert (head["lo"] >= 0, head["hi"] <= 255, head["center"], head["width"]) == (True, True, 127.5, 255.0)
    assert [p["name"] for p in head["presets"]] == ["Default", "Full range"]


def test_resume_a_case_abandoned_by_someone_else(app_db: tuple[str, Engine]) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from pxp.storage.tables import utcnow

    _, engine = app_db
    make_rad(engine)
    eid = create_live_experiment(engine, dataset="toy-rad", name="live-shared")
    gone = ensure_annotator(engine, name="Dr Gone")
    left = claim_next(engine, experiment_id=eid, annotator_id=gone)
    assert left is not None
    assert machine_step(engine, left, Says("Pneumonia", "Consolidation.")) is not None
    two_hours_ago = utcnow() - timedelta(hours=2)
    with engine.begin() as c:
        c.execute(update(Session).where(Session.id == left).values(updated_at=two_hours_ago))  # type: ignore[arg-type]
        c.execute(update(Message).where(Message.session_id == left).values(created_at=two_hours_ago))  # type: ignore[arg-type]
    at = login(new_app("annotate"), "toy-rad")
    mine = at.session_state["annotate_sid"]
    assert mine != left
    resume = by_suffix(at.sidebar.button, f"_takeover_{left}")
    resume.click().run()
    ok(at)
    assert at.session_state["annotate_sid"] == left
    with DB(engine) as db:
        s = db.get(Session, left)
        assert s is not None and s.annotator_id != gone
    assert "Consolidation" in "\n".join(t.value for t in at.text)


def test_an_unreachable_database_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PXP_DATABASE_URL", "postgresql+psycopg://nobody:secret-pw@127.0.0.1:1/none")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    ok(at)
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and "cannot open the database postgresql+psycopg://nobody:***@127.0.0.1:1/none" in errors[0]
    assert "secret-pw" not in errors[0] and "\n" not in errors[0]


def test_a_failing_worker_reports_one_line(app_db: tuple[str, Engine]) -> None:
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.experiments import create_experiment
    from pxp.running.workers import pool as workers
    from pxp.storage.store import db_session

    _, engine = app_db
    make_drug(engine)
    exp = create_experiment(engine, RunConfig(dataset="toy-drug"), name="bad")
    # create_experiment refuses an unknown machine, so the stored config is spoiled afterwards
    # (as one stored by another pxp version could be): the worker fails when it builds the agents
    with db_session(engine) as db:
        row = db.get(Experiment, exp.id)
        assert row is not None
        row.config = {**row.config, "machine": "nosuch:model"}
        db.add(row)
    workers.start(engine, exp.id or 0)
    assert workers.wait(engine, exp.id or 0, timeout=60) == 1
    p = workers.progress(engine, exp.id or 0)
    assert p.status == "failed" and p.error and "\n" not in p.error and "Traceback" not in p.error
    at = new_app("experiments")
    assert any(p.error in plain(e.value) for e in at.error)
    # a configuration error can never be fixed by resuming: no Resume button, and why
    assert not any("Resume" in str(b.label) for b in at.button) and "Cannot be resumed" in texts(at)


def test_datasets_page_upload_form(app_db: tuple[str, Engine], study: Study) -> None:
    _, engine = app_db
    make_drug(engine)
    at = new_app("datasets")
    at.selectbox(key="datasets_kind").set_value("study_drug").run()
    ok(at)
    at.get("file_uploader")[0].upload("bad.csv", b"x,y\n1,2\n", "text/csv")
    at.text_input(key="datasets_name").input("uploaded")
    next(b for b in at.get("form_submit_button") if b.label == "Import").click().run()
    ok(at)
    assert any("Nothing was imported" in e.value for e in at.error)
    at.get("file_uploader")[0].upload("retro.csv", study.drug_csv.read_bytes(), "text/csv")
    next(b for b in at.get("form_submit_button") if b.label == "Import").click().run()
    ok(at)
    assert any("uploaded" in s.value for s in at.success), [e.value for e in at.error]


def test_create_a_new_live_experiment_from_the_sidebar(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    first = at.session_state["annotate_sid"]
    assert not [w for w in at.sidebar.text_input if w.key == "annotate_new_exp_name"], "closed until asked for"
    at.sidebar.toggle(key="annotate_new_exp_open").set_value(True).run()
    at.sidebar.text_input(key="annotate_new_exp_name").input("second round")
    at.sidebar.number_input(key="annotate_new_exp_n").set_value(6)
    assert "next case prepared ahead" in " ".join(c.value for c in at.sidebar.caption)  # the default: 1
    at.sidebar.number_input(key="annotate_new_exp_prepare").set_value(0)
    next(b for b in at.sidebar.get("form_submit_button") if b.label == "Create").click().run()
    ok(at)
    with DB(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "second round")).one()
        assert exp.mode == "live" and exp.n == 6 and exp.config["prepare"] == 0
    assert at.sidebar.selectbox(key="annotate_experiment_toy-rad").value == exp.id
    assert "next case not prepared ahead" in " ".join(c.value for c in at.sidebar.caption)
    assert at.session_state["annotate_sid"] != first
    assert not at.sidebar.toggle(key="annotate_new_exp_open").value, "the form closes once it has created"


def test_a_second_tab_cannot_send_the_same_message_again(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_rad(engine)
    tab1 = login(new_app("annotate"), "toy-rad")
    tab2 = login(new_app("annotate"), "toy-rad")  # the same annotator in a second tab
    sid = tab1.session_state["annotate_sid"]
    assert tab2.session_state["annotate_sid"] == sid
    for tab, label in ((tab1, "Pneumonia"), (tab2, "Atelectasis")):
        by_suffix(tab.selectbox, "_pred").set_value(label)
        by_suffix(tab.text_area, "_expl").input(f"The appearances of {label}.")
        by_suffix(tab.button, "_pick_REFUTE").click().run()
    by_suffix(tab1.button, "_send").click().run()
    ok(tab1)
    by_suffix(tab2.button, "_send").click().run()
    ok(tab2)
    msgs = all_msgs(engine, sid)
    assert [m.j for m in msgs] == [1, 2, 3] and msgs[1].prediction == "Pneumonia"
    # the second tab now shows the conversation as it is: the reply to message 3
    assert "Your reply (message 4)" in texts(tab2)


def test_the_role_picks_the_first_dataset_of_its_task(app_db: tuple[str, Engine]) -> None:
    """A chemist starts on a DRUG dataset, a radiologist on a RAD one."""
    _, engine = app_db
    make_drug(engine)
    make_rad(engine)
    at = new_app("annotate")
    at.sidebar.text_input(key="annotate_name").input("Dr Rao").run()
    ok(at)
    assert at.sidebar.selectbox(key="annotate_dataset").value.endswith("rad")
    at.sidebar.selectbox(key="annotate_role").set_value("Chemist").run()
    ok(at)
    assert at.sidebar.selectbox(key="annotate_dataset").value.endswith("drug")


def test_a_worker_started_elsewhere_is_seen_through_its_heartbeat(app_db: tuple[str, Engine]) -> None:
    """After a server restart (or from another server) the database says the run is running:
    a second worker is refused with one line, Cancel stops it, then Resume finishes it."""
    import os
    import subprocess
    import sys

    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.experiments import create_experiment
    from pxp.running.workers import pool as workers

    url, engine = app_db
    make_rad(engine, per_label=4)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", reps=2, simulated={"latency": 0.05}),
                            name="elsewhere")
    eid = exp.id or 0
    # a worker this server did not start: nothing of it is in this process's memory
    other = subprocess.Popen([sys.executable, "-m", "pxp.running.workers.pool", str(eid)],
                             env={**os.environ, "PXP_DATABASE_URL": url},
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while workers.heartbeat_age(engine, eid) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers.is_running(engine, eid) and workers.progress(engine, eid).running
        with pytest.raises(workers.WorkerError, match="already running") as err:
            workers.start(engine, eid)
        assert "\n" not in str(err.value)
        at = new_app("experiments")
        assert [b for b in at.button if b.key == f"experiments_cancel_{eid}"], "shown as running"
        assert workers.cancel(engine, eid)
        assert other.wait(timeout=30) != 0, "the worker stopped itself at its next heartbeat"
    finally:
        if other.poll() is None:
            other.kill()
    p = workers.progress(engine, eid)
    assert not p.running and p.status == "cancelled" and p.done < p.sessions
    workers.start(engine, eid)
    assert workers.wait(engine, eid, timeout=120) == 0
    p = workers.progress(engine, eid)
    assert p.done == p.sessions and p.status == "finished" and not p.running
    assert workers.heartbeat_age(engine, eid) is None, "a finished worker clears its heartbeat"


PXP_CLI = ["-c", "from pxp.cli.main import main; main()"]  # the console script's entry point


def test_the_cli_refuses_an_experiment_the_app_runs(app_db: tuple[str, Engine]) -> None:
    """`pxp run --resume` takes the app workers' claim: a fresh heartbeat of another worker
    refuses it with one line (exit 1) and leaves that worker's claim alone."""
    import subprocess
    import sys

    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.experiments import create_experiment
    from pxp.running.workers import pool as workers

    url, engine = app_db
    make_rad(engine)
    exp = create_experiment(engine, RunConfig(dataset="toy-rad"), name="app-runs-it")
    eid = exp.id or 0
    assert workers.claim(engine, eid, "appserver:1")  # a worker the app started, beating
    stop = threading.Event()

    def beating() -> None:  # as the app's worker does, however long the CLI takes to start on a loaded machine
        while not stop.wait(1.0):
            workers.beat(engine, eid, "appserver:1")

    beater = threading.Thread(target=beating, daemon=True)
    beater.start()
    try:
        res = subprocess.run([sys.executable, *PXP_CLI, "--db", url, "run", "--resume", "app-runs-it",
                              "--no-progress"], capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        beater.join(timeout=30)
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "already running" in lines[0] and "Traceback" not in res.stderr
    assert workers.is_running(engine, eid) and workers.progress(engine, eid).done == 0
    with DB(engine) as db:
        row = db.get(Experiment, eid)
        assert row is not None and row.worker == "appserver:1"


@pytest.mark.long
def test_the_app_sees_a_cli_run_refuses_a_second_worker_and_its_cancel_pauses_it(
        app_db: tuple[str, Engine]) -> None:
    """`pxp run` writes the heartbeat: the app shows it running, refuses to start a worker on it,
    and Cancel pauses it (exit 130, resumable, claim released); `pxp run --resume` then finishes it."""
    import subprocess
    import sys

    from pxp.running.workers import pool as workers

    url, engine = app_db
    make_rad(engine, per_label=4)
    cli = subprocess.Popen([sys.executable, *PXP_CLI, "--db", url, "run", "--dataset", "toy-rad", "--reps", "2",
                            "--sim-latency", "1", "--name", "from-cli", "--no-progress"],  # long enough
                           # for the Cancel to be seen at a heartbeat (every 2 s; one may miss a busy database)
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        eid = None
        while time.monotonic() < deadline and cli.poll() is None:
            with DB(engine) as db:
                row = db.exec(select(Experiment).where(Experiment.name == "from-cli")).first()
                # claimed, and run_experiment has marked it running (a Cancel before that mark
                # would be overwritten by it: the runner sets "running" unconditionally)
                if row is not None and row.heartbeat_at is not None and row.status == "running":
                    eid = row.id
                    break
            time.sleep(0.05)
        assert eid is not None, cli.stderr.read() if cli.stderr else ""
        assert workers.is_running(engine, eid) and workers.progress(engine, eid).running
        with pytest.raises(workers.WorkerError, match="already running") as err:
            workers.start(engine, eid)
        assert "\n" not in str(err.value)
        assert workers.cancel(engine, eid), "the app cancels a run it did not start through the database"
        _, stderr = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130, stderr
    assert "cancelled" in stderr and "run --resume from-cli" in stderr and "Traceback" not in stderr
    p = workers.progress(engine, eid)
    assert p.status == "cancelled" and not p.running and p.done < p.sessions
    assert workers.heartbeat_age(engine, eid) is None, "the CLI released its claim on the way out"
    res = subprocess.run([sys.executable, *PXP_CLI, "--db", url, "run", "--resume", "from-cli", "--no-progress",
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    p = workers.progress(engine, eid)
    assert p.status == "finished" and p.done == p.sessions and workers.heartbeat_age(engine, eid) is None


def test_a_dead_worker_is_not_running_once_its_heartbeat_is_stale(app_db: tuple[str, Engine]) -> None:
    from datetime import UTC, datetime, timedelta

    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.experiments import create_experiment
    from pxp.running.workers import pool as workers

    _, engine = app_db
    make_drug(engine)
    exp = create_experiment(engine, RunConfig(dataset="toy-drug"), name="crashed")
    eid = exp.id or 0
    assert workers.claim(engine, eid, "otherhost:1")
    assert not workers.claim(engine, eid, "thirdhost:2"), "one worker per experiment"
    with DB(engine) as db:  # the worker died long ago: its last heartbeat is old
        row = db.get(Experiment, eid)
        assert row is not None
        row.status = "running"
        row.heartbeat_at = datetime.now(UTC) - timedelta(seconds=workers.STALE_SECONDS + 1)
        db.add(row)
        db.commit()
    p = workers.progress(engine, eid)
    assert not p.running and p.status == "interrupted"
    workers.start(engine, eid)
    assert workers.wait(engine, eid, timeout=60) == 0
    assert workers.progress(engine, eid).status == "finished"


def _import_on_page(at: AppTest, kind: str, main: tuple[str, bytes, str],
                    extras: list[tuple[str, bytes, str]] | None = None) -> AppTest:
    at.selectbox(key="datasets_kind").set_value(kind).run()
    ok(at)
    uploaders = at.get("file_uploader")
    uploaders[0].upload(*main)
    if extras:
        for ex in extras:
            uploaders[1].upload(*ex)
    at.text_input(key="datasets_name").input("broken")
    next(b for b in at.get("form_submit_button") if b.label == "Import").click().run()
    return ok(at)


@pytest.mark.parametrize("kind, main, extras, says", [
    # a corrupt image behind a valid study CSV
    ("study_rad", ("cases.csv", b"case,label,img_path,report\nc1,Pneumonia,a.png,Opacity.\n", "text/csv"),
     [("a.png", b"\x89PNG\r\n\x1a\nnot really a png", "image/png")], "a.png: corrupt"),
    # a CSV that is not text at all
    ("study_drug", ("retro.csv", bytes(range(256)) * 8, "text/csv"), None, "not UTF-8 text"),
    # a zip that is not a zip
    ("dicom", ("scans.zip", b"PK\x03\x04 truncated", "application/zip"), None, "not a valid zip"),
])
def test_bad_uploads_are_one_line_and_keep_what_is_stored(
    app_db: tuple[str, Engine], kind: str, main: tuple[str, bytes, str],
    extras: list[tuple[str, bytes, str]] | None, says: str,
) -> None:
    from pxp.app.data import datasets_table

    _, engine = app_db
    make_drug(engine)
    before = datasets_table(engine).to_dict("records")
    at = _import_on_page(new_app("datasets"), kind, main, extras)
    errors = [e.value for e in at.error]
    assert any("Nothing was imported" in e for e in errors), errors
    problems = [t.value for t in at.text]
    assert says in problems[0] and all("Traceback" not in p for p in problems), problems
    assert all(len(line) < 400 for p in problems for line in p.splitlines())
    assert datasets_table(engine).to_dict("records") == before, "nothing stored was touched"


def test_an_llm_answer_in_the_wrong_format_aborts_the_case_clearly(app_db: tuple[str, Engine]) -> None:
    """The LLM (a local server speaking the OpenAI wire format) answers without the expected
    fields: the session is aborted, the page says so in one line, the next case follows."""
    from tests.llm_server import FakeLLM, Reply, answer, checker_reply

    _, engine = app_db
    make_rad_images(engine, size=(300, 240))
    with FakeLLM(lambda req: Reply(text="I would rather not say.")) as llm:
        create_live_experiment(engine, dataset="toy-rad-img", name="live-format", machine="openai:gpt-test",
                               base_url=llm.openai_url)
        at = login(new_app("annotate"), "toy-rad-img")
        warnings = [w.value for w in at.warning]
        assert any("was aborted at message 1" in w for w in warnings), [e.value for e in at.error]
        assert all("\n" not in w and "Traceback" not in w for w in warnings)
        assert "is finished" not in texts(at)
        with DB(engine) as db:
            aborted = db.exec(select(Session).where(Session.status == "aborted")).all()
        assert aborted and aborted[0].abort_reason
        assert len(aborted) == 1, "a failing machine does not abort case after case unseen"
        llm.handler = lambda req: checker_reply(req) if req.is_checker else answer("Pneumonia", "Opacity.")
        at.button(key="annotate_next").click().run()
        ok(at)
        assert "Your reply (message 2)" in texts(at), "the next case is ready"


def test_the_first_start_notice_is_for_the_first_visitors_only(app_db: tuple[str, Engine]) -> None:
    from pxp.app.resources import Started

    _, engine = app_db
    started = Started(engine, "Demo data loaded")
    assert started.fresh_notice() == "Demo data loaded"
    assert started.fresh_notice() is None, "once per database, not on every visit"
    assert Started(engine, "Demo data loaded", at=time.time() - 3600).fresh_notice() is None


def test_a_contradicting_tag_is_refused_and_stores_nothing(app_db: tuple[str, Engine]) -> None:
    """No / No, then RATIFY: refused with one line, nothing stored, the answers still show what is recorded."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, msgs = current(engine)
    by_suffix(at.selectbox, "_pred").set_value(msgs[0].prediction)
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_agree_no").click().run()
    by_suffix(at.button, "_pick_RATIFY").click().run()
    ok(at)
    assert "RATIFY contradicts your answers" in texts(at)
    by_suffix(at.button, "_send").click().run()
    ok(at)
    assert any("Not sent" in e.value and "contradicts" in e.value for e in at.error)
    assert len(all_msgs(engine, sid)) == 1, "nothing was stored"
    # the buttons show the facts recorded: the prediction is the machine's, so it matches whatever No said
    assert by_suffix(at.button, "_match_yes").proto.type == "primary"
    assert by_suffix(at.button, "_match_no").proto.type == "secondary"
    assert any("Recorded as matching" in c.value for c in at.caption)
    assert by_suffix(at.button, "_agree_no").proto.type == "primary"


def test_ratify_takes_three_keys_yes_fills_the_machines_answer(app_db: tuple[str, Engine]) -> None:
    """Yes (prediction) fills the machine's prediction, Yes (explanation) its explanation:
    Alt+5, Alt+7, Send store a RATIFY of the machine's answer with no typing or picking."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, msgs = current(engine)
    machine = msgs[0]
    assert by_suffix(at.selectbox, "_pred").options[0] == machine.prediction, "the machine's first"
    by_suffix(at.button, "_match_yes").click().run()
    assert by_suffix(at.selectbox, "_pred").value == machine.prediction
    by_suffix(at.button, "_agree_yes").click().run()
    assert by_suffix(at.text_area, "_expl").value == machine.explanation
    by_suffix(at.button, "_send").click().run()
    ok(at)
    stored = all_msgs(engine, sid)[1]
    assert (stored.tag, stored.prediction, stored.match, stored.agree) == (
        Tag.RATIFY, machine.prediction, True, True)


def test_an_invalid_smiles_shows_in_the_tag_preview(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug")
    sid, _ = current(engine)
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_agree_no").click().run()
    by_suffix(at.text_input, "_pred").input("C1CC.CCO.N((").run()
    ok(at)
    [line] = [plain(e.value) for e in at.error]  # one line, at the field
    assert line.startswith("Cannot send:") and "'C1CC'" in line and "'N(('" in line, (
        "the whole SMILES is checked and every bad fragment named")
    assert "Your message will be tagged" not in texts(at)
    by_suffix(at.button, "_send").click().run()
    assert len(all_msgs(engine, sid)) == 1
