"""Facts from content (DESIGN §1, "The human in the browser" and "Conformance"): the human's
match and changed are computed from the predictions, a tag the content contradicts is refused
on Annotate and in transcripts, and `pxp validate` names stored facts that contradict content."""

from __future__ import annotations

import json
import tempfile
from itertools import count
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdkit import Chem
from sqlalchemy import Engine, func
from sqlmodel import Session as DB
from sqlmodel import col, select
from typer.testing import CliRunner

from pxp.agents.base import Answer, Facts
from pxp.agents.browser import human_content, human_turn
from pxp.cli.main import app
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.transcripts import import_transcripts
from pxp.protocols.pxp.facts import ContentFacts, content_facts, content_violations, fold, same_folded
from pxp.protocols.pxp.rules import Msg, Sender, Tag, agent_tag, stop_reason
from pxp.running.pxp.live.turns import load_session, submit_human
from pxp.storage.store import get_engine
from pxp.storage.tables import Experiment, Message, Run, Session
from pxp.tasks.base import content_match, normalise_label
from tests.factories import live_session_at_j2, make_drug, make_rad

M, H = Sender.MACHINE, Sender.HUMAN
runner = CliRunner()
smiles = content_match("smiles")
labels = content_match("label")


def pxp(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--db", url, *args], catch_exceptions=False)


def messages(engine: Engine) -> int:
    with DB(engine) as db:
        return int(db.exec(select(func.count()).select_from(Message)).one())


# --- the pure core -----------------------------------------------------------------------


def test_the_human_match_is_match_over_its_own_prediction_and_the_machines() -> None:
    hist = [Msg(1, M, Tag.INIT, "CC(=O)O", "acid")]
    f = content_facts(hist, H, "OCC", "x", smiles)
    assert f == ContentFacts(False, False, ("OCC", "CC(=O)O"))
    assert content_facts(hist, H, "OC(C)=O", "x", smiles).match is True  # canonical SMILES sets
    assert content_facts(hist, H, "not smiles", "x", smiles).match is None  # a parse failure decides nothing


def test_changed_compares_the_answer_with_its_own_previous_one() -> None:
    hist = [Msg(1, M, Tag.INIT, "Pneumonia", "e"), Msg(2, H, Tag.REFUTE, "Atelectasis", "mine"),
            Msg(3, M, Tag.REFUTE, "Pneumonia", "e")]
    assert content_facts(hist, H, "atelectasis", " mine ", labels).changed is False
    assert content_facts(hist, H, "Atelectasis", "mine, revised", labels).changed is True
    assert content_facts(hist, H, "Pneumonia", "mine", labels).changed is True


def test_a_printable_texts_only_white_space_is_the_space() -> None:
    """What same_folded rests on: str.split() splits a printable text at U+0020 alone."""
    assert [hex(c) for c in range(0x110000) if chr(c).isspace() and chr(c).isprintable()] == ["0x20"]


@given(st.text(alphabet=st.sampled_from("ab \t\n\u00a0\u3000\u2028\x1c\u00e9"), max_size=8),
       st.text(alphabet=st.sampled_from("ab \t\n\u00a0\u3000\u2028\x1c\u00e9"), max_size=8))
def test_same_folded_is_fold_equality(a: str, b: str) -> None:
    assert same_folded(a, b) == (fold(a) == fold(b))
    assert same_folded("opacity in the left lobe", "opacity  in the left lobe \n")
    assert not same_folded("opacity in the left lobe", "opacity in the right lobe")


def test_the_machines_match_compares_the_humans_message_with_its_own_previous() -> None:
    hist = [Msg(1, M, Tag.INIT, "Pneumonia", "e"), Msg(2, H, Tag.REFUTE, "Atelectasis", "h")]
    f = content_facts(hist, M, "Atelectasis", "adopted", labels)  # a revision: compared with message 1
    assert f.match is False and f.changed is True


# --- Annotate: the tag picker and the Yes/No question ---------------------------------------


def test_ratify_of_a_different_reactant_set_is_refused_naming_both() -> None:
    hist = [Msg(1, M, Tag.INIT, "CC(=O)O", "e")]
    content = human_content(hist, Answer("CCO", "mine"), match_kind="smiles")
    t = human_turn(2, 3, match=True, agree=True, changed=False, chosen=Tag.RATIFY, content=content,
                   noun="reactants")
    assert t.facts is None
    assert t.refused == "RATIFY needs your reactants to match the machine's: you have CCO, it has CC(=O)O"


def test_reject_of_an_identical_set_is_refused() -> None:
    hist = [Msg(1, M, Tag.INIT, "CCO", "e"), Msg(2, H, Tag.REFUTE, "CC", "x"), Msg(3, M, Tag.REFUTE, "CCO", "e")]
    content = human_content(hist, Answer("OCC", "y"), match_kind="smiles")
    t = human_turn(4, 3, match=False, agree=False, changed=content.changed, chosen=Tag.REJECT, content=content,
                   noun="reactants")
    assert t.facts is None and t.refused is not None and "REJECT needs your reactants to differ" in t.refused


def test_the_yes_no_question_never_overrides_the_prediction() -> None:
    hist = [Msg(1, M, Tag.INIT, "Pneumonia", "e")]
    content = human_content(hist, Answer("Atelectasis", "e"), match_kind="label")
    t = human_turn(2, 3, match=True, agree=True, changed=False, content=content, noun="label")
    assert t.tag is Tag.REFUTE and t.facts == Facts(False, True, False)


def test_submitting_a_contradicted_tag_stores_nothing(engine: Engine) -> None:
    make_drug(engine)
    sid = live_session_at_j2(engine, "toy-drug")
    theirs = load_session(engine, sid).messages[0].prediction
    mine = "CCO" if smiles(theirs, "CCO") is False else "CCN"
    # the form says match = True: the content says otherwise, and the engine decides
    out = submit_human(engine, sid, j=2, answer=Answer(mine, "e"), facts=Facts(True, True, False, tag=Tag.RATIFY))
    assert out.status == "refused" and out.message.startswith("RATIFY needs your reactants to match")
    assert messages(engine) == 1
    out = submit_human(engine, sid, j=2, answer=Answer(mine, "e"), facts=Facts(True, True, False))
    assert out.status == "sent" and out.result is not None
    assert out.result.message.tag is Tag.REFUTE and out.result.message.match is False


# --- transcripts -------------------------------------------------------------------------


def _rec(sid: str, j: int, sender: str, tag: str, pred: str, **kw: Any) -> str:
    return json.dumps({"session": sid, "instance": f"x-{sid}", "j": j, "sender": sender, "tag": tag,
                       "prediction": pred, "explanation": kw.pop("explanation", "e"), **kw})


def test_a_rad_ratify_of_another_label_is_refused_with_its_line(tmp_path: Path, db_url: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join([_rec("s", 1, "machine", "INIT", "Pneumonia"),
                            _rec("s", 2, "human", "RATIFY", "Atelectasis", match=True, agree=True)]) + "\n")
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "t", "--task", "rad")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip().splitlines() == [
        "error: t.jsonl:2: match is true in the file but MATCH over the predictions gives false (the human's "
        "Atelectasis, the machine's Pneumonia); fix or drop the column"]
    f.write_text("\n".join([_rec("s", 1, "machine", "INIT", "Pneumonia"),
                            _rec("s", 2, "human", "RATIFY", "Atelectasis")]) + "\n")
    res = pxp(db_url, "import", "transcripts", str(f), "--name", "t", "--task", "rad")
    assert res.exit_code == 1
    assert "t.jsonl:2: tagged RATIFY but the predictions differ" in res.output
    assert messages(get_engine(db_url)) == 0


def test_validate_names_stored_facts_that_contradict_content(tmp_path: Path, db_url: str) -> None:
    f = tmp_path / "ok.jsonl"
    f.write_text("\n".join([_rec("s", 1, "machine", "INIT", "Pneumonia"),
                            _rec("s", 2, "human", "REFUTE", "Atelectasis", agree=True),
                            _rec("s", 3, "machine", "REFUTE", "Pneumonia", agree=True)]) + "\n")
    assert pxp(db_url, "import", "transcripts", str(f), "--name", "t", "--task", "rad", "--n", "3").exit_code == 0
    assert pxp(db_url, "validate").exit_code == 0
    engine = get_engine(db_url)
    with engine.begin() as c:  # the stored record is tampered with: match = true, tag RATIFY
        c.execute(Message.__table__.update().where(col(Message.j) == 2)  # type: ignore[attr-defined]
                  .values(match=True, tag="RATIFY"))
    res = pxp(db_url, "validate")
    assert res.exit_code == 1
    assert "message 2: stored match=True but MATCH over its predictions gives False" in res.output


def test_content_violations_see_a_tag_with_no_stored_facts() -> None:
    msgs = [Msg(1, M, Tag.INIT, "Pneumonia", "e"), Msg(2, H, Tag.RATIFY, "Atelectasis", "e")]
    assert content_violations(msgs, 3, labels) == [
        (2, "tagged RATIFY but the predictions differ (the human's Atelectasis, the machine's Pneumonia)")]
    revise = [*msgs[:1], Msg(2, H, Tag.REFUTE, "Atelectasis", "e"), Msg(3, M, Tag.REVISE, "Pneumonia", "e")]
    assert content_violations(revise, 3, labels) == [(3, "tagged REVISE but the machine's answer is the same "
                                                         "as its message 1")]


# --- the property: every stored human fact equals the one computed from content ------------

RAD = ["Atelectasis", "Pneumonia", "pleural effusion", "Cardiomegaly"]
DRUG = ["CCO", "OCC", "CC(=O)O", "c1ccccc1O", "CCO.CC(=O)O", "OC(C)=O.OCC"]
EXPL = ["e1", "e2"]


def _same(task: str, a: str, b: str) -> bool:
    """MATCH written out again for the test: labels normalised, canonical SMILES sets."""
    if task == "rad":
        return normalise_label(a) == normalise_label(b)
    return {Chem.CanonSmiles(x) for x in a.split(".")} == {Chem.CanonSmiles(x) for x in b.split(".")}


@st.composite
def transcript(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    task = draw(st.sampled_from(["rad", "drug"]))
    pool = RAD if task == "rad" else DRUG
    msgs: list[Msg] = []
    recs: list[dict[str, Any]] = []
    for j in range(1, 9):
        sender = M if j % 2 else H
        pred, expl = draw(st.sampled_from(pool)), draw(st.sampled_from(EXPL))
        if j == 1:
            msg = Msg(1, M, Tag.INIT, pred, expl)
        else:
            own = msgs[-2] if j > 2 else None
            mine = pred if sender is H or own is None else own.prediction
            match = _same(task, msgs[-1].prediction, mine)
            changed = own is not None and not (_same(task, pred, own.prediction) and expl == own.explanation)
            agree = draw(st.booleans())
            msg = Msg(j, sender, agent_tag(j, 3, match, agree, changed), pred, expl, match, agree, changed)
        msgs.append(msg)
        rec = {"session": "s", "instance": "x", "j": j, "sender": sender.value, "tag": msg.tag.value,
               "prediction": pred, "explanation": expl}
        if j > 1:
            rec["agree"] = msg.agree
            if draw(st.booleans()):  # the file's own columns, when given, are the true ones
                rec |= {"match": msg.match, "changed": msg.changed}
        recs.append(rec)
        if stop_reason(msgs, 8) is not None:
            break
    return task, recs


_DIR = tempfile.TemporaryDirectory()
_ENGINE = get_engine(f"sqlite:///{_DIR.name}/prop.db")
_NAMES = count()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcript())
def test_every_stored_human_fact_equals_the_one_computed_from_content(case: tuple[str, list[dict[str, Any]]]) -> None:
    task, recs = case
    name = f"p{next(_NAMES)}"
    path = Path(_DIR.name) / f"{name}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    import_transcripts(_ENGINE, path, name=name, n=8, k=3, task=task)
    with DB(_ENGINE) as db:
        exp = db.exec(select(Experiment).where(Experiment.name == name)).one()
        stored = db.exec(select(Message).join(Session, col(Session.id) == col(Message.session_id))
                         .join(Run, col(Run.id) == col(Session.run_id))
                         .where(Run.experiment_id == exp.id).order_by(col(Message.j))).all()
    assert len(stored) == len(recs)
    for m in stored:
        if m.sender != "human":
            continue
        machine = stored[m.j - 2]
        own = stored[m.j - 3] if m.j > 2 else None
        assert m.match == _same(task, machine.prediction, m.prediction)
        assert m.changed == (own is not None and not (
            _same(task, m.prediction, own.prediction) and m.explanation == own.explanation))


def test_a_file_fact_that_contradicts_content_is_refused(tmp_path: Path, engine: Engine) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join([_rec("s", 1, "machine", "INIT", "CCO"), _rec("s", 2, "human", "REFUTE", "CC"),
                            _rec("s", 3, "machine", "REFUTE", "CCO"),
                            _rec("s", 4, "human", "REFUTE", "CCN", changed=False)]) + "\n")
    try:
        import_transcripts(engine, f, name="c", n=10, k=3, task="drug")
    except ImportProblems as e:
        assert e.problems == [
            "c.jsonl:4: changed is false in the file but the human's answer differs from its message 2; "
            "fix or drop the column"]
    else:
        raise AssertionError("imported")
    assert messages(engine) == 0


def test_an_answer_over_the_text_limit_is_refused_naming_it(engine: Engine) -> None:
    make_rad(engine)
    sid = live_session_at_j2(engine, "toy-rad")
    out = submit_human(engine, sid, j=2, answer=Answer("Pneumonia", "x" * (64 * 1024 + 1)),
                       facts=Facts(True, True, False))
    assert out.status == "refused"
    assert out.message == ("your explanation is 65,537 characters, over the 65,536-character limit for a text "
                           "field; shorten it")
    assert messages(engine) == 1
