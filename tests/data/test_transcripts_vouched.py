"""Importing transcripts checks each shape of session once (docs/development.md "Imports at dataset scale"): a
session whose conformance key settled before with nothing to report is stored from that key, and what is stored
is exactly what checking every session whole stores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from pxp.data.importers import transcripts
from pxp.data.importers.transcripts import import_transcripts
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
    assert len(stored[0]) == 600 + 2 * len(lines)
