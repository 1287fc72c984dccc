"""`pxp validate` on a study of repeated shapes (docs/development.md, "Reading a study"): a session whose
conformance key conformed before is not checked again, so the key must decide conformance exactly, and a bad
session shaped like good ones is still reported, word for word as the whole check reports it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from pxp.analysis import validate as validate_module
from pxp.analysis.validate import SessionViolation, validate
from pxp.data.importers.transcripts import import_transcripts
from pxp.protocols.pxp.facts import conformance_key, conformance_with_content
from pxp.protocols.pxp.rules import Msg, Sender, Tag, agent_tag
from pxp.storage.store import table_of
from pxp.storage.tables import Experiment, Message, Run, Session
from pxp.tasks.base import content_match
from tests.factories import ABORTED, STUDY_SHAPES, write_study

labels = content_match("label")
_M, _S, _R, _E = (table_of(t) for t in (Message, Session, Run, Experiment))


def _random_session(rng: random.Random) -> tuple[list[Msg], int, int, str]:
    """A session mostly as the AGENT rule makes it, from a small pool of content so that keys repeat; now and
    then a stored fact, a tag, a sender or an explanation is wrong, or a fact not stored."""
    preds, expls = ("Pneumonia", "pneumonia ", "Atelectasis"), ("because", "because ", "  ", "other")
    n, k = 5, rng.choice((1, 2, 3))
    msgs: list[Msg] = []
    for j in range(1, rng.randint(1, 6) + 1):
        sender = Sender.MACHINE if j % 2 else Sender.HUMAN
        pred, expl = rng.choice(preds), rng.choice(expls)
        if j == 1:
            msgs.append(Msg(1, sender, Tag.INIT, pred, expl))
            continue
        own = msgs[-2] if j > 2 else None
        mine = pred if sender is Sender.HUMAN or own is None else own.prediction
        match = bool(labels(msgs[-1].prediction, mine))
        changed = own is not None and not (labels(pred, own.prediction) and expl.split() == own.explanation.split())
        agree = rng.random() < 0.5
        tag = agent_tag(j, k, match, agree, changed)
        facts: list[bool | None] = [match, agree, changed]
        if rng.random() < 0.15:
            tag = rng.choice(list(Tag))
        if rng.random() < 0.15:
            facts[rng.randrange(3)] = rng.choice((None, True, False))
        if rng.random() < 0.05:
            sender = sender.other
        msgs.append(Msg(j, sender, tag, pred, expl, *facts))
    return msgs, n, k, rng.choice(("finished", "finished", "aborted", "open"))


def test_sessions_with_one_conformance_key_all_conform_or_none_does() -> None:
    rng = random.Random(7)
    verdicts: dict[tuple[object, ...], set[bool]] = {}
    for _ in range(8_000):
        msgs, n, k, status = _random_session(rng)
        rows = [(m.j, m.sender.value, m.tag.value, m.prediction, m.explanation, m.match, m.agree, m.changed)
                for m in msgs]
        key = conformance_key(rows, n, k, status, labels)
        verdicts.setdefault(key, set()).add(not conformance_with_content(msgs, n, k, status=status, match=labels))
    assert {frozenset(v) for v in verdicts.values()} == {frozenset({True}), frozenset({False})}
    assert sum(1 for v in verdicts.values() if True in v) > 20  # keys shared by conforming sessions, and others
    assert len(verdicts) < 6_000  # keys that repeat, so that the property is tried


def _whole_check(engine: Engine) -> list[SessionViolation]:
    """What validate reports, computed the long way: every session checked message by message."""
    out = []
    with engine.connect() as c:
        sessions = c.execute(select(_S.c.id, _S.c.ordinal, _S.c.n, _S.c.k, _S.c.status, _R.c.repetition,
                                    _E.c.name).join(_R, _R.c.id == _S.c.run_id)
                             .join(_E, _E.c.id == _R.c.experiment_id).order_by(_R.c.id, _S.c.ordinal)).all()
        for s in sessions:
            msgs = [Msg(m.j, Sender(m.sender), Tag(m.tag), m.prediction, m.explanation, m.match, m.agree, m.changed)
                    for m in c.execute(select(_M).where(_M.c.session_id == s.id).order_by(_M.c.j))]
            out += [SessionViolation(s.name, s.repetition, s.id, s.ordinal, v)
                    for v in conformance_with_content(msgs, s.n, s.k, status=s.status, match=labels)]
    return out


def _tamper(engine: Engine, ordinal: int, j: int, **values: object) -> None:
    with engine.begin() as c:
        sid = select(_S.c.id).where(_S.c.ordinal == ordinal).order_by(_S.c.id).limit(1).scalar_subquery()
        c.execute(update(_M).where(_M.c.session_id == sid, _M.c.j == j).values(**values))


@pytest.mark.parametrize("memory", ["kept", "emptied at once"])
def test_a_bad_session_shaped_like_good_ones_is_still_reported(engine: Engine, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, memory: str) -> None:
    """A study of 1,200 sessions in four shapes (so two pages), each kind of fault planted in a session after
    many good ones of its shape: the same violations, in the same words, as checking every session whole."""
    if memory != "kept":
        monkeypatch.setattr(validate_module, "KEY_MESSAGES", 3)
        monkeypatch.setattr(validate_module, "MATCH_CHARS", 10)
    path = write_study(tmp_path / "s.jsonl", 1200, reps=1, shapes=(ABORTED, *STUDY_SHAPES))
    import_transcripts(engine, path, name="S", n=10, k=3, task="rad")
    assert validate(engine) == (1200, [])
    # ordinals from 1, of the shapes in turn: 1 aborted, 2 ratified at once, 3 refuted then revised, 0 rejected
    _tamper(engine, 402, 2, prediction="Cardiomegaly")  # RATIFY of another label: content contradicts match
    _tamper(engine, 403, 3, explanation="   ")  # a REVISE giving no reason
    _tamper(engine, 404, 4, match=True)  # a stored fact against the content
    _tamper(engine, 1107, 3, changed=False)  # an answer changed, stored as kept
    _tamper(engine, 1108, 4, tag="REFUTE")  # no stop condition in a finished session
    _tamper(engine, 1109, 1, tag="RATIFY")  # the first message not INIT
    with engine.begin() as c:  # stopped sessions still open, another marked aborted
        c.execute(update(_S).where(_S.c.ordinal.in_((1110, 1111))).values(status="open"))  # bounded: two sessions
        c.execute(update(_S).where(_S.c.ordinal == 1114).values(status="aborted"))
    checked, found = validate(engine)
    assert checked == 1200
    assert found == _whole_check(engine)
    assert {v.ordinal for v in found} == {402, 403, 404, 1107, 1108, 1109, 1110, 1111, 1114}
