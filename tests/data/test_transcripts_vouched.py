"""Importing transcripts checks each shape of session once (docs/development.md "Imports at dataset scale"): a
session whose conformance key settled before with nothing to report is stored from that key, so the key must
decide what settling finds, and what is stored is exactly what checking every session whole stores."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from pxp.data.importers import transcripts
from pxp.data.importers.transcript_lines import Filed, settle_facts, settled_rows
from pxp.data.importers.transcripts import import_transcripts
from pxp.data.match import content_match
from pxp.protocols.pxp.facts import Row, conformance_key
from pxp.protocols.pxp.rules import Msg, Sender, Tag, conformance
from pxp.storage.store import make_engine, table_of, upgrade
from pxp.storage.tables import Context, Message, Session
from tests.factories import ABORTED, STUDY_SHAPES, write_study

_S, _M, _C = (table_of(t) for t in (Session, Message, Context))


def _stored(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as c:
        sessions = c.execute(select(_S.c.id, _S.c.ordinal, _S.c.status, _S.c.stop_reason, _S.c.n, _S.c.k,
                                    _S.c.learn_note, _S.c.context_kept).order_by(_S.c.id)).all()
        msgs = c.execute(select(_M.c.session_id, _M.c.j, _M.c.sender, _M.c.receiver, _M.c.tag, _M.c.prediction,
                                _M.c.explanation, _M.c.match, _M.c.agree, _M.c.changed, _M.c.llm_call_id)
                         .order_by(_M.c.session_id, _M.c.j)).all()
        ctx = c.execute(select(_C.c.session_id, _C.c.j, _C.c.content).order_by(_C.c.session_id, _C.c.j)).all()
        stamps = c.exec_driver_sql("SELECT created_at FROM message UNION SELECT created_at FROM session").scalars()
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", str(t)) for t in stamps)
    return [*map(tuple, sessions), *map(tuple, msgs), *map(tuple, ctx)]


def test_sessions_stored_from_their_key_are_those_checked_whole(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file (the study's shapes, some with the file's own facts, two repetitions) into two databases:
    once as usual, once remembering no key, so every session is settled and checked whole."""
    path = write_study(tmp_path / "s.jsonl", 600, shapes=(ABORTED, *STUDY_SHAPES))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for i, rec in enumerate(lines):  # a third of the human replies carry agree, and match and changed as computed
        if rec["sender"] == "human" and i % 3 == 0:
            rec |= {"agree": rec["tag"] == "RATIFY", "match": rec["tag"] == "RATIFY", "changed": False}
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    stored = []
    for remembered in (transcripts.KEY_MESSAGES, 0):
        monkeypatch.setattr(transcripts, "KEY_MESSAGES", remembered)
        engine = make_engine(f"sqlite:///{tmp_path}/db{remembered}.db")
        upgrade(engine)
        got = import_transcripts(engine, path, name="S", n=10, k=3, task="rad")
        assert (got.sessions, got.messages, got.nonconformant) == (600, len(lines), [])
        stored.append(_stored(engine))
        engine.dispose()
    assert stored[0] == stored[1]
    assert len(stored[0]) == 600 + len(lines)  # sessions and messages: a transcript gives no context C_j


def test_a_key_decides_what_settling_finds_and_what_is_stored() -> None:
    """On 6,000 random sessions of 1 to 4 messages (the file's facts given, left out or wrong now and then):
    sessions of one key all settle and conform with nothing to report, or none does; and a clean one stored from
    its key is what settling it stores."""
    rng = random.Random(11)
    match = content_match("label")
    clean: dict[tuple[object, ...], bool] = {}
    repeated = 0
    for _ in range(6_000):
        rows: list[Row] = []
        for j in range(1, rng.randint(1, 4) + 1):
            sender = "machine" if j % 2 else "human"
            tag = "INIT" if j == 1 and rng.random() < 0.9 else rng.choice(("RATIFY", "REFUTE", "REVISE", "REJECT"))
            facts = [rng.choice((None, None, None, None, True, False)) for _ in range(3)]
            rows.append((j, sender, tag, rng.choice(("Pneumonia", "pneumonia", "Atelectasis")),
                         rng.choice(("because", "because ", " ", "other")), *facts))
        status = rng.choice(("finished", "aborted"))
        key = conformance_key(rows, 6, 2, status, match)
        problems: list[str] = []
        found = settle_facts([Filed(Msg(j, Sender(s), Tag(t), p, e, m, a, c), f"f:{j}")
                              for j, s, t, p, e, m, a, c in rows], 2, match, problems, problems)
        ok = not problems and not conformance(found, 6, 2, status=status)
        repeated += key in clean
        assert clean.setdefault(key, ok) == ok
        if ok:
            assert settled_rows(rows, key) == [
                (m.j, m.sender.value, m.tag.value, m.prediction, m.explanation, m.match, m.agree, m.changed)
                for m in found]
    assert True in clean.values() and False in clean.values()
    assert repeated > 1_000  # keys repeat, so the property is tried
