"""Overlap and assignment (docs/research.md, Live experiments and overlap): each case annotated by k distinct
annotators, never
twice by one, never served to more than k, under concurrent claims and submits on SQLite
and PostgreSQL; per-annotator case lists and progress; the paper's h1/h2 design as one
experiment with overlap 2 and its Table 1 by annotator."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import Engine, func, update
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import Answer, Facts
from pxp.analysis.report import render_many, reports_by
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.live.abandonment import abandoned_sessions, take_over
from pxp.running.pxp.live.assignment import (
    LiveError,
    claim_next,
    create_live_experiment,
    ensure_annotator,
    live_experiments,
)
from pxp.running.pxp.live.overlap import annotator_progress, overlap_summary, parse_case_lists
from pxp.running.pxp.live.turns import load_session, machine_for, machine_step, submit_human
from pxp.storage.store import alembic_config, upgrade
from pxp.storage.tables import Claim, Dataset, Message, Session, utcnow
from tests.analysis.test_report import cli
from tests.factories import LABELS, make_drug, make_rad, race


def _sessions(engine: Engine) -> list[Session]:
    with DB(engine) as db:
        return list(db.exec(select(Session)).all())


def _check_overlap(engine: Engine, k: int) -> None:
    """No case served to more than k annotators, nor twice to one; claims match sessions."""
    rows = _sessions(engine)
    per_case: dict[int, list[int | None]] = defaultdict(list)
    for s in rows:
        per_case[s.instance_id].append(s.annotator_id)
    for who in per_case.values():
        assert len(who) <= k and len(set(who)) == len(who), per_case
    with DB(engine) as db:
        claims = db.exec(select(Claim.instance_id, Claim.annotator_id)).all()
    assert len(set(claims)) == len(claims)
    assert {(s.instance_id, s.annotator_id) for s in rows} <= set(claims)


def _play(engine: Engine, sid: int, machine: object, *, agree: bool) -> int:
    """Annotate session `sid` to its end; the human ratifies (agree) or refutes throughout."""
    sent = 0
    for _ in range(40):
        s = load_session(engine, sid)
        if s.turn is None:
            return sent
        if s.turn is Sender.MACHINE:
            machine_step(engine, sid, machine)  # type: ignore[arg-type]
            continue
        last = s.last_from(Sender.MACHINE)
        assert last is not None
        out = submit_human(engine, sid, j=s.j, answer=Answer(last.prediction, last.explanation),
                           facts=Facts(agree, agree, False))
        assert out.status == "sent", out
        sent += 1
    raise AssertionError(f"session {sid} did not end")


def test_h1_h2_design_is_one_experiment_with_overlap_2(engine: Engine) -> None:
    """The follow-up paper's DRUG-h1 / DRUG-h2: two chemists on every molecule, one experiment."""
    make_drug(engine)  # 3 molecules
    eid = create_live_experiment(engine, dataset="toy-drug", name="DRUG", n=4, k=3, overlap=2)
    machine = machine_for(engine, eid)
    h1, h2, h3 = (ensure_annotator(engine, name=n) for n in ("h1", "h2", "h3"))
    cases: dict[int, list[int]] = defaultdict(list)
    for who, agree in ((h1, True), (h2, False)):
        while (sid := claim_next(engine, experiment_id=eid, annotator_id=who)) is not None:
            s = load_session(engine, sid)
            cases[who].append(s.ordinal)
            _play(engine, sid, machine, agree=agree)
    assert cases[h1] == [1, 2, 3] and cases[h2] == [1, 2, 3], "each annotator sees every case once"
    assert claim_next(engine, experiment_id=eid, annotator_id=h3) is None, "every case has its 2 annotators"
    _check_overlap(engine, 2)
    info = next(e for e in live_experiments(engine) if e.id == eid)
    assert (info.overlap, info.sessions, info.finished, info.remaining) == (2, 6, 6, 0)
    assert overlap_summary(engine, eid) == (2, 3)
    reps = reports_by(engine, ["DRUG"], "annotator")
    assert [r["experiment"] for r in reps] == ["h1", "h2"]
    md = render_many(reps, "markdown")
    assert md.splitlines()[0] == "| Count | h1 | h2 |"
    code, out = cli(engine.url.render_as_string(hide_password=False), "report", "--experiment", "DRUG",
                    "--by", "annotator", "--format", "markdown")
    assert code == 0 and out.splitlines()[0] == "| Count | h1 | h2 |", out
    # h1 ratified every machine answer, h2 refuted every one: the columns differ
    assert reps[0] != reps[1]
    assert [(p.annotator, p.done, p.open, p.cases) for p in annotator_progress(engine, eid)] == [
        ("h1", 3, 0, 3), ("h2", 3, 0, 3)]


def test_concurrent_claims_respect_the_overlap(any_engine: Engine) -> None:
    make_drug(any_engine)  # 3 cases × overlap 2 = 6 slots
    eid = create_live_experiment(any_engine, dataset="toy-drug", overlap=2)
    people = [ensure_annotator(any_engine, name=f"annotator {i}") for i in range(12)]
    got = race(12, lambda i: claim_next(any_engine, experiment_id=eid, annotator_id=people[i]))
    claimed = [g for g in got if g is not None]
    assert len(claimed) == 6 and len(set(claimed)) == 6, got
    assert Counter(s.instance_id for s in _sessions(any_engine)).most_common()[0][1] == 2
    _check_overlap(any_engine, 2)


def test_one_annotator_in_several_tabs_never_gets_a_case_twice(any_engine: Engine) -> None:
    make_drug(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-drug", overlap=3)
    me = ensure_annotator(any_engine, name="two tabs")
    got = race(8, lambda i: claim_next(any_engine, experiment_id=eid, annotator_id=me))
    rows = _sessions(any_engine)
    assert {g for g in got if g is not None} == {s.id for s in rows} and 1 <= len(rows) <= 3, got
    assert len({s.instance_id for s in rows}) == len(rows), "one session per case for this annotator"
    _check_overlap(any_engine, 3)
    # abort them all: this annotator has seen every case, nothing more is served
    with any_engine.begin() as c:
        c.execute(update(Session).values(status="aborted"))
    while claim_next(any_engine, experiment_id=eid, annotator_id=me) is not None:
        with any_engine.begin() as c:
            c.execute(update(Session).values(status="aborted"))
    assert len({s.instance_id for s in _sessions(any_engine)}) == len(_sessions(any_engine)) == 3


def test_take_over_keeps_the_overlap(any_engine: Engine) -> None:
    make_drug(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-drug", overlap=2)
    a, b, c = (ensure_annotator(any_engine, name=n) for n in ("a", "b", "c"))
    sa = claim_next(any_engine, experiment_id=eid, annotator_id=a)
    sb = claim_next(any_engine, experiment_id=eid, annotator_id=b)
    assert sa is not None and sb is not None
    assert load_session(any_engine, sa).instance_id == load_session(any_engine, sb).instance_id
    with any_engine.begin() as conn:
        conn.execute(update(Session).where(Session.id == sa)  # type: ignore[arg-type]
                     .values(updated_at=utcnow() - timedelta(hours=2)))
    # b already has this case: it is not offered, and a forced take-over is refused
    assert abandoned_sessions(any_engine, experiment_id=eid, exclude_annotator=b) == []
    assert take_over(any_engine, session_id=sa, annotator_id=b) is False
    assert load_session(any_engine, sa).annotator == "a"
    idle = abandoned_sessions(any_engine, experiment_id=eid, exclude_annotator=c)
    assert [(x.session_id, x.ordinal) for x in idle] == [(sa, 1)]
    assert take_over(any_engine, session_id=sa, annotator_id=c) is True
    # a saw case 1 and left it: a is served case 2, never case 1 again
    nxt = claim_next(any_engine, experiment_id=eid, annotator_id=a)
    assert nxt is not None and load_session(any_engine, nxt).ordinal == 2
    _check_overlap(any_engine, 2)


def test_case_lists_restrict_what_each_annotator_is_served(engine: Engine) -> None:
    make_drug(engine)  # drug_1, drug_2, drug_3
    lists = parse_case_lists("\ufeffAnnotator,Instance,note\nh1,drug_2,x\n h2 ,drug_2,\nh2,drug_3,\n\n")
    assert lists == {"h1": ["drug_2"], "h2": ["drug_2", "drug_3"]}
    eid = create_live_experiment(engine, dataset="toy-drug", overlap=2, case_lists=lists)
    h1, h2, other = (ensure_annotator(engine, name=n) for n in ("h1", "h2", "someone else"))
    s1 = claim_next(engine, experiment_id=eid, annotator_id=h1)
    assert s1 is not None and load_session(engine, s1).instance_key == "drug_2"
    with engine.begin() as c:
        c.execute(update(Session).values(status="finished"))
    assert claim_next(engine, experiment_id=eid, annotator_id=h1) is None
    assert claim_next(engine, experiment_id=eid, annotator_id=other) is None, "not on the lists"
    keys = []
    while (sid := claim_next(engine, experiment_id=eid, annotator_id=h2)) is not None:
        keys.append(load_session(engine, sid).instance_key)
        with engine.begin() as c:
            c.execute(update(Session).values(status="finished"))
    assert keys == ["drug_2", "drug_3"]
    prog = {p.annotator: (p.done, p.cases) for p in annotator_progress(engine, eid)}
    assert prog == {"h1": (1, 1), "h2": (2, 2)}


@pytest.mark.parametrize(("csv_text", "error"), [
    ("who,what\na,b\n", "columns annotator and instance"),
    ("annotator,instance\n", "no rows"),
    ("annotator,instance\nh1,\n", "line 2 of the case list needs both"),
])
def test_bad_case_list_files_are_one_line(csv_text: str, error: str) -> None:
    with pytest.raises(LiveError, match=error) as err:
        parse_case_lists(csv_text)
    assert "\n" not in str(err.value)


def test_bad_case_lists_and_overlap_are_refused(engine: Engine) -> None:
    make_drug(engine)
    with pytest.raises(LiveError, match="cases not in the experiment: nope"):
        create_live_experiment(engine, dataset="toy-drug", case_lists={"h1": ["drug_1", "nope"]})
    with pytest.raises(LiveError, match="'drug_1' is listed for 3 annotators, more than the overlap 2"):
        create_live_experiment(engine, dataset="toy-drug", overlap=2,
                               case_lists={"a": ["drug_1"], "b": ["drug_1"], "c": ["drug_1"]})
    with pytest.raises(LiveError, match="overlap must be between 1 and 100"):
        create_live_experiment(engine, dataset="toy-drug", overlap=0)
    assert live_experiments(engine) == [], "nothing stored"


def test_migration_0007_down_and_up_keeps_who_saw_what(any_engine: Engine) -> None:
    make_drug(any_engine)
    eid = create_live_experiment(any_engine, dataset="toy-drug")
    me = ensure_annotator(any_engine, name="h1")
    assert claim_next(any_engine, experiment_id=eid, annotator_id=me) is not None
    cfg = alembic_config(any_engine)
    with any_engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0004")
    upgrade(any_engine)  # the claims of existing live sessions are filled in
    with DB(any_engine) as db:
        assert db.exec(select(func.count()).select_from(Claim)).one() == 1


def _annotate_concurrently(engine: Engine, *, annotators: int, submits: int) -> None:
    make_rad(engine, per_label=80)  # 400 cases, 800 slots
    with engine.begin() as c:  # a label set in the config, as imported RAD datasets have
        c.execute(update(Dataset).values(config={"labels": LABELS}))
    eid = create_live_experiment(engine, dataset="toy-rad", n=10, k=3, overlap=2)
    machine = machine_for(engine, eid)
    people = [ensure_annotator(engine, name=f"expert {i}") for i in range(annotators)]
    sent: list[list[tuple[int, int]]] = [[] for _ in people]

    def work(i: int) -> None:
        while len(sent[i]) < submits:
            sid = claim_next(engine, experiment_id=eid, annotator_id=people[i])
            assert sid is not None, "ran out of cases"
            s = load_session(engine, sid)
            if s.turn is Sender.MACHINE:
                machine_step(engine, sid, machine)
                continue
            assert s.turn is Sender.HUMAN
            last = s.last_from(Sender.MACHINE)
            assert last is not None
            agree = (len(sent[i]) + i) % 8 == 0  # some sessions end early, most run to the bound
            out = submit_human(engine, sid, j=s.j, answer=Answer(last.prediction, last.explanation),
                               facts=Facts(agree, agree, False))
            assert out.status == "sent", out
            sent[i].append((sid, s.j))

    race(annotators, work)
    assert all(len(x) == submits for x in sent)
    with DB(engine) as db:
        msgs = db.exec(select(Message.session_id, Message.j, Message.sender)).all()
    human = {(sid, j) for sid, j, sender in msgs if sender == "human"}
    assert human == {x for xs in sent for x in xs}, "no lost human message, none extra"
    by_session: dict[int, list[int]] = defaultdict(list)
    for sid, j, _ in msgs:
        by_session[sid].append(j)
    for js in by_session.values():
        assert sorted(js) == list(range(1, len(js) + 1)), "message numbers unique and without gaps"
    _check_overlap(engine, 2)
    owners = {s.id: s.annotator_id for s in _sessions(engine)}
    for i, xs in enumerate(sent):
        assert {owners[sid] for sid, _ in xs} == {people[i]}


@pytest.mark.long
def test_8_annotators_100_submits_on_sqlite(engine: Engine) -> None:
    t0 = time.perf_counter()
    _annotate_concurrently(engine, annotators=8, submits=100)
    assert time.perf_counter() - t0 < 120


@pytest.mark.long
@pytest.mark.postgres
def test_8_annotators_100_submits_on_postgresql(pg_engine: Engine) -> None:
    t0 = time.perf_counter()
    _annotate_concurrently(pg_engine, annotators=8, submits=100)
    assert time.perf_counter() - t0 < 120
