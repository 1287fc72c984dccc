"""Overlap in the app (docs/research.md, Live experiments and overlap): a live experiment with overlap and case lists
created from
the Annotate page's sidebar, and per-annotator progress on the Experiments page."""

from __future__ import annotations

from sqlalchemy import Engine, update
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.storage.tables import Experiment, Session
from tests.app import test_app
from tests.app.test_app import login, new_app, ok, plain, texts
from tests.factories import make_drug, make_rad

app_db = test_app.app_db  # the app's fixture: a fresh SQLite database, no API keys


def _create(at, name: str, overlap: int, csv: bytes | None):  # type: ignore[no-untyped-def]
    at.sidebar.toggle(key="annotate_new_exp_open").set_value(True).run()
    at.sidebar.text_input(key="annotate_new_exp_name").input(name)
    at.sidebar.number_input(key="annotate_new_exp_overlap").set_value(overlap)
    if csv is not None:
        at.sidebar.get("file_uploader")[0].upload("lists.csv", csv, "text/csv")
    next(b for b in at.sidebar.get("form_submit_button") if b.label == "Create").click().run()
    return ok(at)


def test_create_a_live_experiment_with_overlap_and_case_lists(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug", name="h1")
    _create(at, "DRUG", 2, b"annotator,instance\nh1,drug_2\nh2,drug_2\nh2,drug_3\n")
    with DB(engine) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == "DRUG")).one()
        ids = {k: v for k, v in exp.config["case_lists"].items()}
    assert exp.mode == "live" and exp.config["overlap"] == 2 and set(ids) == {"h1", "h2"}
    assert at.sidebar.selectbox(key="annotate_experiment_toy-drug").value == exp.id
    sid = at.session_state["annotate_sid"]
    with DB(engine) as db:
        s = db.get(Session, sid)
        assert s is not None and s.instance_id == ids["h1"][0], "h1 is served the case on their list"
    bars = [str(p.proto.text) for p in at.sidebar.get("progress")]
    assert bars == ["0 of 6 annotations done (2 annotators per case)"]


def test_a_bad_case_list_is_one_line_and_stores_nothing(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug", name="h1")
    _create(at, "bad lists", 1, b"annotator,instance\nh1,no_such_case\n")
    assert any("cases not in the experiment: no_such_case" in plain(e.value) for e in at.sidebar.error), texts(at)
    _create(at, "bad file", 1, b"\xff\xfe not text")
    assert any("not UTF-8" in plain(e.value) or "columns annotator and instance" in plain(e.value)
               for e in at.sidebar.error)
    with DB(engine) as db:
        names = set(db.exec(select(Experiment.name)).all())
    assert not names & {"bad lists", "bad file"}


def _finish(engine: Engine, eid: int, **cases: int) -> None:
    """Each named annotator claims and finishes that many cases of live experiment `eid`."""
    for name, n in cases.items():
        who = ensure_annotator(engine, name=name)
        for _ in range(n):
            assert claim_next(engine, experiment_id=eid, annotator_id=who) is not None
            with engine.begin() as c:
                c.execute(update(Session).where(Session.annotator_id == who)  # type: ignore[arg-type]
                          .values(status="finished"))


def test_experiments_page_shows_progress_per_annotator(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    _finish(engine, create_live_experiment(engine, dataset="toy-drug", name="DRUG <b>", overlap=2), h1=3, h2=1)
    at = ok(new_app("experiments"))
    labels = [e.label for e in at.expander]
    assert any("1 case done by 2 annotators · overlap 2 (annotators per case)" in x for x in labels), labels
    frames = [d.value for d in at.dataframe if "annotator" in d.value.columns]
    assert len(frames) == 1
    rows = frames[0].set_index("annotator")[["done", "open", "cases"]].to_dict("index")
    assert rows == {"h1": {"done": 3, "open": 0, "cases": 3}, "h2": {"done": 1, "open": 0, "cases": 3}}


def test_the_experiments_page_counts_annotators_not_the_overlap(app_db: tuple[str, Engine]) -> None:
    """Two annotators who did 5 cases each with overlap 1: 10 cases done by 2 annotators, not "by 1 annotator"."""
    _, engine = app_db
    make_rad(engine, per_label=2)
    _finish(engine, create_live_experiment(engine, dataset="toy-rad", name="RAD", overlap=1), h1=5, h2=5)
    at = ok(new_app("experiments"))
    labels = [e.label for e in at.expander]
    assert any("RAD: 10 cases done by 2 annotators · overlap 1" in x for x in labels), labels
