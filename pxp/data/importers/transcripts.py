"""Import transcripts (JSONL, one message per line) as an experiment (DESIGN §6).

Fields: session, instance, j, sender (machine|human), tag (any case), prediction,
explanation; optional match, agree, changed, repetition, annotator, status (finished, the
default, or aborted: a session that ended before its stop rule, e.g. on a format failure).
`annotator` names who played the human (one name per session); cases several annotators saw
are compared by pxp.analysis.agreement (docs/research.md, Agreement).
Everything is validated before anything is written; non-conformant sessions are refused
with their violations unless allowed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import select

from pxp.data.chem import smiles_size_problem
from pxp.data.importers.common import ImportProblems, read_jsonl
from pxp.protocols.pxp.rules import Msg, Sender, Tag, conformance, stop_reason
from pxp.storage.store import db_session
from pxp.storage.tables import Annotator, Context, Dataset, Experiment, Instance, Message, Run, Session

REQUIRED = ("session", "instance", "j", "sender", "tag")


@dataclass
class ImportedTranscripts:
    experiment: str
    sessions: int
    messages: int
    nonconformant: list[str] = field(default_factory=list)


def _bool(v: Any, where: str, problems: list[str]) -> bool | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return v.strip().lower() in ("true", "yes", "1")
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    problems.append(f"{where}: expected true or false, got {v!r}")
    return None


def _annotator(rec: dict[str, Any]) -> str | None:
    """The line's annotator (who played the human; agreement compares them), or None."""
    return str(rec.get("annotator") or "").strip() or None


def read_transcripts(path: Path) -> tuple[dict[tuple[int, str], list[Msg]], dict[tuple[int, str], dict[str, Any]]]:
    """Parse and check the file; returns messages and per-session info keyed by (rep, session)."""
    problems: list[str] = []
    sessions: dict[tuple[int, str], list[Msg]] = defaultdict(list)
    info: dict[tuple[int, str], dict[str, Any]] = {}
    seen: dict[tuple[int, str, int], int] = {}  # (rep, session, j) -> its line; the store keys messages by (session, j)
    for lineno, rec in read_jsonl(path):
        where = f"{path.name}:{lineno}"
        missing = [f for f in REQUIRED if rec.get(f) in (None, "")]
        if set(missing) == {"j", "sender", "tag"} and rec.get("status") == "aborted":
            # a session aborted before its first message: no message, counted apart
            key = (int(rec.get("repetition") or 1), str(rec["session"]))
            sessions.setdefault(key, [])
            info.setdefault(key, {"instance": str(rec["instance"]), "annotator": _annotator(rec),
                                  "status": "aborted"})
            continue
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        try:
            j = int(rec["j"])
            sender = Sender.parse(str(rec["sender"]))
            tag = Tag.parse(str(rec["tag"]))
            rep = int(rec.get("repetition") or 1)
        except (ValueError, TypeError) as err:
            problems.append(f"{where}: {err}")
            continue
        key = (rep, str(rec["session"]))
        first = seen.setdefault((rep, key[1], j), lineno)
        if first != lineno:
            problems.append(f"{where}: message {j} of session {key[1]} (repetition {rep}) is also on line {first}")
            continue
        facts = [_bool(rec.get(f), f"{where} ({f})", problems) for f in ("match", "agree", "changed")]
        sessions[key].append(
            Msg(j, sender, tag, str(rec.get("prediction") or ""), str(rec.get("explanation") or ""), *facts)
        )
        ann = _annotator(rec)
        i = info.setdefault(key, {"instance": str(rec["instance"]), "annotator": ann,
                                  "status": str(rec.get("status") or "finished")})
        if i["status"] not in ("finished", "aborted"):
            problems.append(f"{where}: status must be finished or aborted, got {i['status']!r}")
        if i["instance"] != str(rec["instance"]):
            problems.append(f"{where}: session {rec['session']} names two instances")
        if ann is not None and i["annotator"] is not None and i["annotator"] != ann:
            problems.append(f"{where}: session {rec['session']} names two annotators "
                            f"({i['annotator']!r} and {ann!r})")
        elif i["annotator"] is None:
            i["annotator"] = ann
    if problems:
        raise ImportProblems(problems)
    for key in sessions:
        sessions[key].sort(key=lambda m: m.j)
    return dict(sessions), info


def import_transcripts(
    engine: Engine,
    path: Path,
    *,
    name: str,
    n: int,
    k: int,
    task: str = "text",
    allow_nonconformant: bool = False,
) -> ImportedTranscripts:
    """Validate then store the transcripts as experiment `name` (mode "imported")."""
    bounds = [f"{what} must be at least 1, got {v}" for what, v in (("the message bound n", n), ("k", k)) if v < 1]
    if bounds:  # not a property of one session: --allow-nonconformant does not cover it
        raise ImportProblems(bounds)
    sessions, info = read_transcripts(path)
    if task == "drug":  # predictions are SMILES: over a size limit, refused before anything is stored
        sizes = [f"session {sid} (repetition {rep}), message {m.j}: {p}" for (rep, sid), msgs in sessions.items()
                 for m in msgs if (p := smiles_size_problem(m.prediction))]
        if sizes:
            raise ImportProblems(sizes)
    bad: list[str] = []
    for (rep, sid), msgs in sessions.items():
        for v in conformance(msgs, n, k, status=info[(rep, sid)]["status"]):
            bad.append(f"session {sid} (repetition {rep}), {v}")
    if bad and not allow_nonconformant:
        raise ImportProblems(bad)
    with db_session(engine) as db:
        if db.exec(select(Experiment).where(Experiment.name == name)).first() is not None:
            raise ImportProblems([f"an experiment named {name!r} already exists"])
        ds_name = f"transcripts:{name}"
        ds = db.exec(select(Dataset).where(Dataset.name == ds_name)).first()
        if ds is None:
            ds = Dataset(name=ds_name, task=task, source=str(path), description=f"instances named in {path.name}")
            db.add(ds)
            db.flush()
        instances: dict[str, int] = {}
        for i in db.exec(select(Instance).where(Instance.dataset_id == ds.id)).all():
            instances[i.key] = i.id or 0
        exp = Experiment(
            name=name,
            task=task,
            mode="imported",
            status="finished",
            n=n,
            k=k,
            config={"source": str(path), "n": n, "k": k, "task": task},
        )
        db.add(exp)
        db.flush()
        runs: dict[int, Run] = {}
        annotators: dict[str, int] = {}
        ordinals: dict[int, int] = defaultdict(int)
        count = 0
        for (rep, sid), msgs in sessions.items():
            if rep not in runs:
                runs[rep] = Run(experiment_id=exp.id or 0, repetition=rep, status="finished")
                db.add(runs[rep])
                db.flush()
            inst_key = info[(rep, sid)]["instance"]
            if inst_key not in instances:
                inst = Instance(dataset_id=ds.id or 0, key=inst_key, ordinal=len(instances) + 1)
                db.add(inst)
                db.flush()
                instances[inst_key] = inst.id or 0
            ann_id = None
            ann = info[(rep, sid)].get("annotator")
            if ann:
                if ann not in annotators:
                    row = db.exec(select(Annotator).where(Annotator.name == str(ann))).first()
                    if row is None:
                        row = Annotator(name=str(ann), role="imported")
                        db.add(row)
                        db.flush()
                    annotators[ann] = row.id or 0
                ann_id = annotators[ann]
            ordinals[rep] += 1
            session = Session(
                run_id=runs[rep].id or 0,
                instance_id=instances[inst_key],
                ordinal=ordinals[rep],
                n=n,
                k=k,
                status=info[(rep, sid)]["status"],
                stop_reason=stop_reason(msgs, n) if info[(rep, sid)]["status"] == "finished" else None,
                annotator_id=ann_id,
                context_kept=True,
                learn_note=f"imported session {sid}",
            )
            db.add(session)
            db.flush()
            for m in msgs:
                db.add(
                    Message(
                        session_id=session.id or 0,
                        j=m.j,
                        sender=m.sender.value,
                        receiver=m.sender.other.value,
                        tag=m.tag.value,
                        prediction=m.prediction,
                        explanation=m.explanation,
                        match=m.match,
                        agree=m.agree,
                        changed=m.changed,
                    )
                )
                db.add(Context(session_id=session.id or 0, j=m.j, content={"imported": True, "session": sid}))
                count += 1
    return ImportedTranscripts(name, len(sessions), count, bad)
