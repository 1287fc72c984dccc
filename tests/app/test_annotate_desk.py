"""The Annotate page as an expert's workstation (README "Annotate"): one chord to agree, the image
window stored with the message, the annotator kept in the URL and the half-typed reply kept as a
draft across reloads."""

from __future__ import annotations

import json

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from pxp.app.router import VIEWS
from pxp.protocols.pxp.rules import Tag
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import machine_step
from pxp.storage.tables import Context, Draft
from tests.app.test_app import APP, Says, all_msgs, app_db, by_suffix, current, login, new_app, ok, plain, texts
from tests.factories import make_drug, make_rad, make_rad_images

__all__ = ["app_db"]  # the fixture, shared with test_app


def test_one_chord_agrees_sends_ratify_and_says_what_was_sent(app_db: tuple[str, Engine]) -> None:
    """Alt+A (the button "I agree with the machine"): the machine's prediction and explanation sent as
    the expert's, match and agree Yes, RATIFY; a line above the next form (not a toast over the machine's next
    message) says what was sent."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, msgs = current(engine)
    button = by_suffix(at.button, "_agree_all")
    assert button.proto.shortcut == "alt+a" and button.label == "I agree with the machine"
    assert any(c.value.startswith("Keyboard: Alt+A I agree with the machine") for c in at.caption)
    button.click().run()
    ok(at)
    stored = all_msgs(engine, sid)[1]
    assert (stored.tag, stored.prediction, stored.explanation, stored.match, stored.agree) == (
        Tag.RATIFY, msgs[0].prediction, msgs[0].explanation, True, True)
    said = f"Sent message 2 as RATIFY by Alt+A (you agreed with the machine): {msgs[0].prediction}"
    # said in a line above the next form, in the page's flow: no toast covers the machine's next message
    assert not at.toast
    going_on = all_msgs(engine, sid)[-1].tag != Tag.RATIFY
    assert said in plain(texts(at))
    assert going_on or ("is finished" in plain(texts(at)) and "Case before: " + said in plain(texts(at)))


def test_a_chord_the_rule_cannot_send_sends_nothing_and_says_why(app_db: tuple[str, Engine]) -> None:
    """When agreeing cannot be sent as RATIFY (here the machine's reactants are not a valid SMILES),
    the chord stores nothing and one line says why; the form is untouched."""
    _, engine = app_db
    make_drug(engine)
    eid = create_live_experiment(engine, dataset="toy-drug", name="bad-smiles")
    me = ensure_annotator(engine, name="Dr Rao")
    sid = claim_next(engine, experiment_id=eid, annotator_id=me)
    assert sid is not None and machine_step(engine, sid, Says("C1CC((", "a made-up step")) is not None
    at = login(new_app("annotate"), "toy-drug")
    assert current(engine)[0] == sid
    by_suffix(at.text_area, "_expl").input("my own pathway").run()
    by_suffix(at.button, "_agree_all").click().run()
    ok(at)
    [line] = [plain(e.value) for e in at.error if "Alt+A" in plain(e.value)]
    assert line.startswith("Not sent: you cannot agree by Alt+A here: the machine's reactants cannot be sent")
    assert len(all_msgs(engine, sid)) == 1, "nothing was stored"
    assert by_suffix(at.text_area, "_expl").value == "my own pathway"


def test_the_window_the_radiologist_settled_on_is_stored_with_the_message(app_db: tuple[str, Engine]) -> None:
    """The viewer's {center, width, invert} goes into the message's context row as "view", and the
    Sessions transcript shows it under that message."""
    _, engine = app_db
    make_rad_images(engine, size=(300, 240), labels=["Pneumonia", "Atelectasis"])
    at = login(new_app("annotate"), "toy-rad-img")
    sid, _ = current(engine)
    viewer = at.get("bidi_component")[0]
    states = at._tree.get_widget_states()
    ws = states.widgets.add()
    ws.id = viewer.proto.id
    ws.json_value = json.dumps({"wl": {"center": 90.5, "width": 120.0, "invert": True}})
    at._run(states)
    ok(at)
    by_suffix(at.button, "_agree_all").click().run()
    ok(at)
    with DB(engine) as db:
        row = db.exec(select(Context).where(Context.session_id == sid, Context.j == 2)).one()
    assert row.content["view"] == {"center": 90.5, "width": 120.0, "invert": True}
    at.switch_page(str(VIEWS / "sessions.py"))
    at.query_params["session"] = str(sid)
    at.run()
    ok(at)
    assert "Viewed at W 120 · L 90.5 · inverted" in plain(texts(at))


def test_the_annotator_and_the_draft_survive_a_reload_and_go_when_sent(app_db: tuple[str, Engine]) -> None:
    """The name and role are kept in the URL; the half-typed reply (prediction, explanation, answers,
    tag) is stored as a draft, restored in a fresh page (a reload or a restarted server), and
    discarded when the message is sent."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    assert (at.query_params["annotator"], at.query_params["role"]) == ("Dr Rao", "Radiologist")
    sid, _ = current(engine)
    by_suffix(at.selectbox, "_pred").set_value("Pneumothorax")
    by_suffix(at.text_area, "_expl").input("A pleural line at the apex.")
    at.run()
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_pick_REFUTE").click().run()
    ok(at)
    # a new page from the same URL: nobody types a name, the reply is back
    again = AppTest.from_file(APP, default_timeout=60)
    again.query_params["annotator"] = "Dr Rao"
    again.query_params["role"] = "Radiologist"
    again.switch_page(str(VIEWS / "annotate.py")).run()
    ok(again)
    assert again.session_state["annotate_name"] == "Dr Rao"
    assert current(engine)[0] == sid
    assert by_suffix(again.selectbox, "_pred").value == "Pneumothorax"
    assert by_suffix(again.text_area, "_expl").value == "A pleural line at the apex."
    assert by_suffix(again.button, "_match_no").proto.type == "primary"
    assert by_suffix(again.button, "_pick_REFUTE").proto.type == "primary"
    with DB(engine) as db:
        assert len(db.exec(select(Draft)).all()) == 1
    by_suffix(again.button, "_send").click().run()
    ok(again)
    assert all_msgs(engine, sid)[1].tag is Tag.REFUTE
    with DB(engine) as db:
        assert not db.exec(select(Draft).where(Draft.session_id == sid, Draft.j == 2)).all(), "discarded on send"


def test_a_disagreement_with_an_empty_explanation_cannot_be_sent(app_db: tuple[str, Engine]) -> None:
    """A disagreement carries its reason (docs/annotating.md, Tags): REFUTE with nothing in "My explanation" says
    "Cannot send: say why you disagree" and stores nothing; with a reason it is sent."""
    _, engine = app_db
    make_rad(engine)
    at = login(new_app("annotate"), "toy-rad")
    sid, _ = current(engine)
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_agree_no").click().run()
    by_suffix(at.selectbox, "_pred").set_value("Pneumothorax")
    by_suffix(at.text_area, "_expl").input("   ")
    ok(at.run())
    assert [plain(e.value) for e in at.error] == ["Cannot send: say why you disagree (your explanation is empty)"]
    ok(by_suffix(at.button, "_send").click().run())
    assert [m.j for m in all_msgs(engine, sid)] == [1]
    by_suffix(at.text_area, "_expl").input("Apical pleural line with no lung markings beyond it.")
    ok(by_suffix(at.button, "_send").click().run())
    sent = all_msgs(engine, sid)
    assert [m.tag for m in sent][:2] == ["INIT", "REFUTE"] and sent[1].explanation.startswith("Apical")
