"""A disagreement carries its reason (docs/protocol.md, Agents, messages and tags; PXP-2024 §2: "in all cases, the
complete message has the tag, along with a_n's current prediction and explanation"): a REFUTE, REVISE or REJECT
with an empty explanation is a conformance violation, the engine refuses to store one, an imported transcript
holding one is refused with its file and line, and the database proxy never sends one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import Answer, Facts
from pxp.analysis.validate import validate
from pxp.data.importers.transcripts import import_transcripts
from pxp.protocols.pxp.rules import Msg, Sender, Tag, conformance, missing_reason
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.live.turns import load_session, submit_human
from pxp.storage.tables import Instance, Message
from tests.factories import live_session_at_j2, make_rad

M, H = Sender.MACHINE, Sender.HUMAN


@pytest.mark.parametrize("tag", [Tag.REFUTE, Tag.REVISE, Tag.REJECT])
def test_a_disagreement_without_an_explanation_is_a_violation(tag: Tag) -> None:
    assert missing_reason(tag, "  \n") == f"a {tag.value} says why you disagree: its explanation is empty"
    assert missing_reason(tag, "the apex is clear") is None
    j = 4 if tag is Tag.REJECT else 3
    msgs = [Msg(1, M, Tag.INIT, "a", "x"), Msg(2, H, Tag.REFUTE, "b", "y")]
    msgs += [Msg(3, M, Tag.REFUTE, "a", "x")] if j == 4 else []
    msgs.append(Msg(j, M if j == 3 else H, tag, "c", ""))
    found = [str(v) for v in conformance(msgs, 10, 3, status="open" if tag is not Tag.REJECT else "finished")]
    assert f"message {j}: a {tag.value} says why you disagree: its explanation is empty" in found, found


@pytest.mark.parametrize("tag", [Tag.RATIFY, Tag.INIT])
def test_agreement_needs_no_words(tag: Tag) -> None:
    assert missing_reason(tag, "") is None


def test_the_engine_refuses_to_store_a_refute_without_a_reason(engine: Engine) -> None:
    make_rad(engine)
    sid = live_session_at_j2(engine, "toy-rad")
    out = submit_human(engine, sid, j=2, answer=Answer("Pneumonia", "   "), facts=Facts(False, True, False))
    assert out.status == "refused" and "says why you disagree" in out.message
    assert len(load_session(engine, sid).messages) == 1


def test_a_transcript_holding_one_is_refused_with_its_line(engine: Engine, tmp_path: Path) -> None:
    rows = [
        {"session": "s1", "instance": "c1", "j": 1, "sender": "machine", "tag": "INIT", "prediction": "a",
         "explanation": "x"},
        {"session": "s1", "instance": "c1", "j": 2, "sender": "human", "tag": "REFUTE", "prediction": "b",
         "explanation": ""},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(Exception, match=r"t\.jsonl:2.*says why you disagree") as err:
        import_transcripts(engine, path, name="t", n=10, k=3)
    assert "\n" not in str(err.value)
    with DB(engine) as db:
        assert db.exec(select(Message)).all() == []


def test_the_proxy_says_why_even_where_the_dataset_stores_no_explanation(engine: Engine) -> None:
    make_rad(engine, per_label=2)
    with DB(engine) as db:  # a dataset with predictions only
        db.exec(update(Instance).values(reference_explanation=""))  # type: ignore[call-overload]
        db.commit()
    exp = create_experiment(engine, RunConfig(dataset="toy-rad", split="train", reps=1, seed=3,
                                              simulated={"accuracy": 0.3, "adopt": 0.3}), name="bare")
    run_experiment(engine, exp.id or 0)
    with DB(engine) as db:
        said = db.exec(select(Message.tag, Message.explanation).where(Message.sender == "human")).all()
    disagreements = [e for t, e in said if t in ("REFUTE", "REVISE", "REJECT")]
    assert disagreements and all(e.strip() for e in disagreements)
    assert validate(engine, experiment_id=exp.id)[1] == []
