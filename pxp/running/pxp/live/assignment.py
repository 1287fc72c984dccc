"""Live assignment: annotators, live experiments and claims (DESIGN §3, docs/research.md, Live experiments and overlap).

With overlap k each case has k slots: slot s of the case at queue position p is the
session ordinal (p - 1)·k + s. An annotator claims a slot by inserting its Session with
that ordinal and, in the same transaction, a Claim row: the unique (run_id, ordinal) key
lets exactly one annotator win each slot, so a case is never served to more than k
annotators, and the unique (run_id, instance_id, annotator_id) key of Claim means nobody
is served the same case twice, on SQLite and PostgreSQL alike, whatever the timing.
Per-annotator case lists (the config's `case_lists`) restrict what a listed annotator is
served; when there are lists, an annotator not in them is served nothing. An annotator's
own open session is resumed first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, func, insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.errors import PxpError
from pxp.running.pxp.config import RunConfig, RunError
from pxp.running.pxp.experiments import create_experiment
from pxp.storage import audit
from pxp.storage.store import db_session
from pxp.storage.tables import Annotator, Claim, Experiment, Run, Session, utcnow

SIMULATED_NAME = "Simulated agent"


class LiveError(PxpError, RuntimeError):
    """A live-annotation problem worth one clear line to the user."""


def ensure_annotator(engine: Engine, *, name: str, role: str = "") -> int:
    """The annotator's id, creating the row on first use (names are unique)."""
    name = " ".join(name.split())
    if not name:
        raise LiveError("please enter your name")
    if len(name) > 200:
        raise LiveError("the name is too long (200 characters at most)")
    for _ in range(3):
        with db_session(engine) as db:
            row = db.exec(select(Annotator).where(Annotator.name == name)).first()
            if row is not None:
                if role and row.role != role:
                    row.role = role[:100]
                    db.add(row)
                return row.id or 0
        try:
            with db_session(engine) as db:
                a = Annotator(name=name, role=role[:100])
                db.add(a)
                db.flush()
                return a.id or 0
        except IntegrityError:
            continue  # created concurrently: read it back
    raise LiveError(f"could not register annotator {name!r}")


def machine_name(machine: str) -> str:
    """How the machine agent is shown: the simulated one is always labelled as such."""
    return SIMULATED_NAME if machine == "simulated" else machine


def create_live_experiment(
    engine: Engine, *, dataset: str, name: str | None = None, n: int = 10, k: int = 3,
    machine: str = "simulated", checker: str = "lexical", base_url: str | None = None,
    seed: int = 0, shuffle: bool = False, split: str | None = None,
    temperature: float | None = None, max_tokens: int | None = None,
    overlap: int = 1, case_lists: Mapping[str, Sequence[str]] | None = None, prepare: int | None = None,
) -> int:
    """A live experiment over a dataset: one Run whose instance order is the claim queue.

    Each case is annotated by `overlap` distinct annotators; `case_lists` (annotator name →
    instance keys) restricts what each annotator is served; `prepare` is how many cases are kept ready
    ahead of each annotator (pxp.running.pxp.live.prepare: default 1, 0 = off). Stored by
    pxp.running.pxp.experiments.create_experiment, as every experiment is.
    """
    if n < 2 or k < 1:
        raise LiveError("n must be at least 2 and k at least 1")
    cfg = RunConfig(
        dataset=dataset, split=split, machine=machine, human="browser", checker=checker,
        base_url=base_url, n=n, k=k, seed=seed, shuffle=shuffle, reps=1,
        temperature=temperature if machine != "simulated" else None, max_tokens=max_tokens or None,
    )
    try:
        exp = create_experiment(engine, cfg, name=(name or "").strip() or None, mode="live",
                                overlap=overlap, case_lists=case_lists, prepare=prepare)
    except RunError as err:
        raise LiveError(str(err)) from None
    return exp.id or 0


@dataclass(frozen=True)
class LiveExperimentInfo:
    """A live experiment as the Annotate page lists it."""

    id: int
    name: str
    dataset: str
    task: str
    machine: str
    n: int
    k: int
    instances: int
    finished: int
    open: int
    overlap: int = 1
    prepare: int = 1

    @property
    def sessions(self) -> int:
        """How many sessions the experiment asks for: every case, `overlap` times."""
        return self.instances * self.overlap

    @property
    def remaining(self) -> int:
        return self.sessions - self.finished - self.open


def overlap_of(exp: Experiment) -> int:
    """How many distinct annotators annotate each case of a live experiment (default 1)."""
    return max(1, int(exp.config.get("overlap", 1) or 1))


def prepare_of(exp: Experiment) -> int:
    """How many cases a live experiment keeps ready ahead of each annotator (its config's "prepare";
    default 1, 0 = off)."""
    try:
        return max(0, int(exp.config.get("prepare", 1)))
    except (TypeError, ValueError):
        return 1


def case_number(ordinal: int, overlap: int) -> int:
    """The queue position of the case a live session's ordinal (its slot) belongs to."""
    return (ordinal - 1) // max(1, overlap) + 1


def slot_number(ordinal: int, overlap: int) -> int:
    """The annotator slot (1..overlap) of the case a live session's ordinal belongs to."""
    return (ordinal - 1) % max(1, overlap) + 1


def live_experiments(engine: Engine, *, dataset: str | None = None) -> list[LiveExperimentInfo]:
    """Live experiments (newest first), with their progress."""
    with DB(engine) as db:
        exps = db.exec(
            select(Experiment).where(Experiment.mode == "live").order_by(col(Experiment.id).desc())
        ).all()
        out = []
        for e in exps:
            ds_name = str(e.config.get("dataset", ""))
            if dataset is not None and ds_name != dataset:
                continue
            run = db.exec(select(Run).where(Run.experiment_id == e.id)).first()
            counts: dict[str, int] = {}
            if run is not None:
                for status, c in db.exec(
                    select(Session.status, func.count()).where(Session.run_id == run.id)
                    .group_by(Session.status)
                ).all():
                    counts[status] = int(c)
            out.append(LiveExperimentInfo(
                id=e.id or 0, name=e.name, dataset=ds_name, task=e.task,
                machine=str(e.config.get("machine", "simulated")), n=e.n, k=e.k,
                instances=len(run.instance_order) if run is not None else 0,
                finished=counts.get("finished", 0) + counts.get("aborted", 0),
                open=counts.get("open", 0), overlap=overlap_of(e), prepare=prepare_of(e),
            ))
    return out


def live_run(db: DB, experiment_id: int) -> tuple[Experiment, Run]:
    """The live experiment and its one run (LiveError if there is none)."""
    exp = db.get(Experiment, experiment_id)
    if exp is None or exp.mode != "live":
        raise LiveError(f"live experiment {experiment_id} does not exist")
    run = db.exec(select(Run).where(Run.experiment_id == experiment_id)).first()
    if run is None or run.id is None:
        raise LiveError(f"live experiment {exp.name!r} has no run")
    return exp, run


def own_open_session(engine: Engine, *, experiment_id: int, annotator_id: int) -> int | None:
    """The annotator's open session in this experiment, to resume, if any."""
    with DB(engine) as db:
        _, run = live_run(db, experiment_id)
        sid = db.exec(
            select(Session.id).where(
                Session.run_id == run.id, Session.annotator_id == annotator_id,
                Session.status == "open",
            ).order_by(col(Session.ordinal))
        ).first()
    return sid


def allowed_cases(db: DB, exp: Experiment, annotator_id: int) -> set[int] | None:
    """The instance ids this annotator may be served (None: any case of the experiment)."""
    lists = exp.config.get("case_lists")
    if not lists:
        return None
    who = db.get(Annotator, annotator_id)
    return set(lists.get(who.name, [])) if who is not None else set()


def unlisted(engine: Engine, *, experiment_id: int, annotator_id: int) -> str | None:
    """The annotator's name when the experiment has case lists and none is theirs (so they are
    served nothing); None when they have cases (listed, or no lists at all)."""
    with DB(engine) as db:
        exp, _ = live_run(db, experiment_id)
        if allowed_cases(db, exp, annotator_id) != set():
            return None
        who = db.get(Annotator, annotator_id)
        return who.name if who is not None else ""


def claim_next(engine: Engine, *, experiment_id: int, annotator_id: int) -> int | None:
    """The session to annotate next: the annotator's own open one, else a new claim.

    A claim inserts the Session with the slot's ordinal and the annotator's Claim row in
    one transaction; either unique key failing (the slot was taken, or this annotator
    was served the case meanwhile, in another tab) writes nothing, and the next slot or
    case is tried. None when no case is left for this annotator.
    """
    own = own_open_session(engine, experiment_id=experiment_id, annotator_id=annotator_id)
    if own is not None:
        return own
    return claim_new(engine, experiment_id=experiment_id, annotator_id=annotator_id)


def claim_new(engine: Engine, *, experiment_id: int, annotator_id: int) -> int | None:
    """A new claim for the annotator (the next case they were not served), whatever they hold open;
    None when no case is left for them."""
    with DB(engine) as db:
        exp, run = live_run(db, experiment_id)
        k = overlap_of(exp)
        allowed = allowed_cases(db, exp, annotator_id)
        taken = set(db.exec(select(Session.ordinal).where(Session.run_id == run.id)).all())
        seen = set(db.exec(select(Claim.instance_id).where(
            Claim.run_id == run.id, Claim.annotator_id == annotator_id)).all())
        order = list(run.instance_order)
    for pos, iid in enumerate(order, start=1):
        if iid in seen or (allowed is not None and iid not in allowed):
            continue
        for slot in range(1, k + 1):
            ordinal = (pos - 1) * k + slot
            if ordinal in taken:
                continue
            sid = _claim(engine, run_id=run.id or 0, exp=exp, instance_id=iid, ordinal=ordinal,
                         annotator_id=annotator_id)
            if sid is not None:
                return sid
    return None


def _claim(engine: Engine, *, run_id: int, exp: Experiment, instance_id: int, ordinal: int,
           annotator_id: int) -> int | None:
    """Insert the slot's session, the annotator's claim and its "opened" audit row together; None if
    a key was taken."""
    now = utcnow()
    try:
        with engine.begin() as conn:
            sid = int(conn.execute(
                insert(Session).returning(col(Session.id)),
                [{
                    "run_id": run_id, "instance_id": instance_id, "ordinal": ordinal, "n": exp.n,
                    "k": exp.k, "status": "open", "annotator_id": annotator_id,
                    "created_at": now, "updated_at": now,
                }],
            ).scalar_one() or 0)
            conn.execute(insert(Claim).values(run_id=run_id, instance_id=instance_id,
                                              annotator_id=annotator_id, session_id=sid, created_at=now))
            audit.write(conn, "opened", session_id=sid, annotator_id=annotator_id)
        return sid
    except IntegrityError:
        return None  # another annotator took this slot, or this annotator this case
