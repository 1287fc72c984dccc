"""Unusable answers (DESIGN §1 "Format failures"), against the local wire-format server on both APIs.

Each kind of unusable reply is recognised and named (a refusal, an empty or null content, a wrong
structure, no prediction, a label outside the task's set, a reply over the size bound); a reply
over the bound is never stored whole; a run whose first sessions abort for format pauses with exit 2
and one line naming the model, the reason and the start of the last reply; `pxp run --resume` after
the server is fixed runs those sessions again (the aborted attempts kept) and ends with the same
tables as a run that never met the fault.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func
from sqlmodel import col, select
from typer.testing import CliRunner

from pxp.agents.base import Answer, FormatFailure, InstanceView, Query
from pxp.agents.llm import LLMMachine
from pxp.cli.main import app
from pxp.llm.base import ProviderOptions
from pxp.llm.registry import make_provider
from pxp.protocols.pxp.rules import Sender
from pxp.storage.store import db_session
from pxp.storage.tables import Context, Dataset, Instance, LLMCall, Message, Session, SessionAttempt
from pxp.tasks.registry import task_spec
from tests.factories import DRUGS, make_drug
from tests.llm_server import FakeLLM, Reply, Request, adopting_model, answer, checker_reply, serve_both_apis

cli = CliRunner()
MODELS = {"anthropic": "anthropic:claude-sonnet-4-6", "openai": "openai:gpt-4.1"}
BIG = "x" * (10 * 1024 * 1024)

#: name -> (reply to a generator request, the kind pxp must name)
FAULTS: dict[str, tuple[Callable[[Request], Reply], str]] = {
    "refusal text": (lambda r: Reply(text="I'm sorry, but I can't help with that request."), "refusal"),
    "refusal stop": (lambda r: Reply(raw=json.dumps(_refusal(r)).encode()), "refusal"),
    "empty": (lambda r: Reply(text=""), "empty reply"),
    "null content": (lambda r: Reply(raw=json.dumps(_null(r)).encode()), "empty reply"),
    "wrong structure": (lambda r: Reply(text='[{"reactants": ["CCO"]}]'), "wrong structure"),
    "object fields": (lambda r: Reply(data={"prediction": {"smiles": "CCO"}, "explanation": ["x"]}),
                      "wrong structure"),
    "no prediction": (lambda r: Reply(text="Explanation: the ester is made from the acid."), "no prediction"),
    "invalid smiles": (lambda r: answer("C1CC(", "ring closure"), "invalid SMILES"),
    "10 MB": (lambda r: answer("CCO", BIG), "reply too long"),
}


def _refusal(req: Request) -> dict[str, object]:
    if req.api == "anthropic":
        return {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [],
                "stop_reason": "refusal", "usage": {"input_tokens": 5, "output_tokens": 1}}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": None, "refusal": "I cannot help."}}]}


def _null(req: Request) -> dict[str, object]:
    if req.api == "anthropic":
        return {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": None,
                "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 0}}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None}}]}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    yield from serve_both_apis(monkeypatch, retries="0")


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_unusable_reply_is_recognised_and_named(server: FakeLLM, api: str, fault: str) -> None:
    reply, kind = FAULTS[fault]
    server.handler = reply
    machine = LLMMachine(make_provider(MODELS[api], ProviderOptions(max_retries=0)), task_spec("drug"),
                         max_attempts=2)
    target, reactants, expl = DRUGS[0]
    x = InstanceView(1, "drug_1", "drug", target, "", Answer(reactants, expl))
    q = Query(instance=x, sender=Sender.MACHINE, j=1, n=10, k=3, history=[], session_id=1)
    with pytest.raises(FormatFailure) as err:
        machine.ask(q)
    assert err.value.kind == kind
    assert str(err.value).startswith(f"{kind}: {MODELS[api]} gave no usable answer in 2 attempts")
    assert len(str(err.value)) < 1_000  # one line, never the whole reply
    assert [c.error.split(":")[1].strip() for c in q.calls if c.error] == [kind, kind]
    if fault == "10 MB":  # the correction sent back carries at most an excerpt of the reply
        second = server.generator_requests()[-1]
        assert sum(len(t) for t in second.texts()) < 10_000


def _pxp(db_url: str, *args: str) -> tuple[int, str, str]:
    r = cli.invoke(app, ["--db", db_url, *args])
    return r.exit_code, r.stdout, r.stderr


def _drug_first(req: Request) -> Reply:
    return answer("CCO.CC(=O)O", "A Fischer esterification of the acid with the alcohol.")


def _table(db_url: str, name: str) -> dict[str, object]:
    code, out, err = _pxp(db_url, "report", "--experiment", name, "--format", "json")
    assert code == 0, err
    report = json.loads(out[: out.rindex("}") + 1])
    return {k: v for k, v in report.items() if k not in ("experiment", "experiments", "name", "created")}


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_run_on_unusable_replies_pauses_and_resumes_to_the_same_tables(
    engine: Engine, db_url: str, server: FakeLLM, api: str, tmp_path: Path,
) -> None:
    make_drug(engine, "drug")
    with db_session(engine) as db:  # six targets: the run pauses after the first three
        ds = db.exec(select(Dataset).where(Dataset.name == "drug")).one()
        for o, (target, reactants, expl) in enumerate(DRUGS * 2, start=1):
            if o > len(DRUGS):
                db.add(Instance(dataset_id=ds.id or 0, key=f"drug_{o}", ordinal=o, payload=target,
                                split="train", reference_prediction=reactants, reference_explanation=expl))
    good = adopting_model(_drug_first)
    faults = [f for _, (f, _) in FAULTS.items()]
    seen: list[int] = [0]

    def faulty(req: Request) -> Reply:
        if req.is_checker:
            return checker_reply(req)
        seen[0] += 1
        return faults[seen[0] % len(faults)](req)

    server.handler = faulty
    run = ["run", "--dataset", "drug", "--machine", MODELS[api], "--checker", "lexical", "--no-progress",
           "--seed", "7"]
    code, _out, err = _pxp(db_url, *run, "--name", "faulty")
    assert code == 2, err
    paused = [line for line in err.splitlines() if "paused" in line]
    assert len(paused) == 1, err
    assert MODELS[api] in paused[0] and "gave no usable answer" in paused[0] and "last reply:" in paused[0]
    assert len(paused[0]) < 600
    with db_session(engine) as db:
        statuses = [s.status for s in db.exec(select(Session).order_by(col(Session.ordinal))).all()]
        assert statuses == ["aborted"] * 3 + ["open"] * 3
        longest = db.exec(select(func.max(func.length(LLMCall.error)))).one()
        assert longest is not None and longest < 2_000  # a 10 MB reply is never kept whole
        assert all(len(json.dumps(c.content)) < 100_000 for c in db.exec(select(Context)).all())
    assert (tmp_path / "pxp.db").stat().st_size < 5 * 1024 * 1024
    by_reason = _table(db_url, "faulty")["aborted_by_reason"]
    assert isinstance(by_reason, dict) and sum(by_reason.values()) == 3
    assert set(by_reason) <= {kind for _, kind in FAULTS.values()}
    code, out, _ = _pxp(db_url, "report", "--experiment", "faulty")
    assert code == 0 and "by reason: " in out

    server.handler = good  # the server is fixed: resume runs the aborted sessions again
    code, _out, err = _pxp(db_url, "run", "--resume", "faulty", "--no-progress")
    assert code == 0, err
    with db_session(engine) as db:
        assert {s.status for s in db.exec(select(Session)).all()} == {"finished"}
        attempts = db.exec(select(SessionAttempt)).all()
        assert len(attempts) == 3 and all(a.status == "aborted" and a.abort_reason for a in attempts)
        assert db.exec(select(func.count()).select_from(Message)).one() > 0
    assert _pxp(db_url, "validate")[0] == 0

    code, _out, err = _pxp(db_url, *run, "--name", "clean")  # the same run that never met the fault
    assert code == 0, err
    assert _table(db_url, "faulty") == _table(db_url, "clean")
