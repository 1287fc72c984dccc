"""The simulated agent behaves like a model (docs/annotating.md, the simulated agent): for every demo case and seed
its prediction and explanation belong together (a finding argued with a text written for that finding; a synthesis
argued with the case's own molecules), it revises toward the expert in its own words and never sends the expert's
text back, and the demo stays reproducible from its seed."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import InstanceView, Query
from pxp.agents.simulated import SimulatedConfig, SimulatedMachine
from pxp.data.chem import smiles_set
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.running.pxp.controlled.demo import DEMO_DRUG, DEMO_EXPERIMENTS, DEMO_RAD, ensure_demo
from pxp.running.pxp.instances import instance_view
from pxp.storage.store import dataset_instances, find_dataset
from pxp.storage.tables import Experiment, Message, Run, Session

SEEDS = range(6)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    from pxp.storage.schema import upgrade
    from pxp.storage.store import make_engine

    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('demo') / 'demo.db'}")
    upgrade(engine)
    ensure_demo(engine)
    return engine


def _pool(engine: Engine, name: str) -> list[InstanceView]:
    with DB(engine) as db:
        ds = find_dataset(db, name=name)
        assert ds is not None and ds.id is not None
        return [instance_view(engine, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds.id)]


def _coherent(pool: list[InstanceView], x: InstanceView, prediction: str, explanation: str) -> bool:
    """Whether `explanation` argues `prediction` for case x."""
    if x.task == "drug":  # the case's own disconnection, naming the reagents the prediction changes
        if prediction == x.reference.prediction:
            return explanation == x.reference.explanation or (prediction in explanation and x.payload in explanation)
        changed = smiles_set(prediction) - smiles_set(x.reference.prediction)
        own = explanation.startswith(x.reference.explanation) or x.payload in explanation
        return own and all(c in explanation for c in changed)
    written_for = {p.reference.explanation for p in pool if p.reference.prediction == prediction}
    return explanation in written_for or explanation == f"The appearances are most consistent with {prediction}."


@pytest.mark.parametrize("dataset", [DEMO_RAD, DEMO_DRUG])
def test_every_first_answer_argues_its_own_prediction(demo: Engine, dataset: str) -> None:
    pool = _pool(demo, dataset)
    wrong = 0
    for seed in SEEDS:
        machine = SimulatedMachine(pool, SimulatedConfig(seed=seed, accuracy=0.5))
        for x in pool:
            a = machine.initial(x, 0)
            assert a.explanation.strip()
            assert _coherent(pool, x, a.prediction, a.explanation), (x.key, a)
            wrong += a.prediction != x.reference.prediction
    assert wrong > 0  # the wrong answers were checked too


@pytest.mark.parametrize("dataset", [DEMO_RAD, DEMO_DRUG])
def test_a_revision_takes_the_experts_finding_in_its_own_words(demo: Engine, dataset: str) -> None:
    pool = _pool(demo, dataset)
    for seed in SEEDS:
        machine = SimulatedMachine(pool, SimulatedConfig(seed=seed, adopt=1.0))
        for x in pool:
            first = machine.initial(x, 0)
            other = next(p for p in pool if p.reference.prediction != first.prediction)
            words = f"My own reading of case {x.key}: {other.reference.prediction}, and here is why."
            history = (Msg(1, Sender.MACHINE, Tag.INIT, first.prediction, first.explanation),
                       Msg(2, Sender.HUMAN, Tag.REJECT, other.reference.prediction, words),
                       )
            q: Any = Query(instance=x, sender=Sender.MACHINE, j=3, n=10, k=1, history=history)
            a = machine.ask(q)
            assert a.prediction == other.reference.prediction
            assert a.explanation != words and words not in a.explanation
            assert _coherent(pool, x, a.prediction, a.explanation), (x.key, a)


def test_every_machine_message_of_the_demo_runs_argues_its_prediction(demo: Engine) -> None:
    """In the demo's controlled runs (the database proxy as the expert) every machine message, revisions included,
    argues its own prediction with the machine's own repertoire (the dataset's texts, its templates)."""
    checked = 0
    for dataset, name in DEMO_EXPERIMENTS.items():
        pool = _pool(demo, dataset)
        by_id = {x.id: x for x in pool}
        with DB(demo) as db:
            exp = db.exec(select(Experiment).where(Experiment.name == name)).one()
            rows = db.exec(select(Message, Session.instance_id).join(Session, Session.id == Message.session_id)
                           .join(Run, Run.id == Session.run_id).where(Run.experiment_id == exp.id)).all()
        for m, instance_id in rows:
            if m.sender == "machine":
                assert _coherent(pool, by_id[instance_id], m.prediction, m.explanation), (name, m.j, m.prediction)
                checked += 1
    assert checked > 0


def test_the_demo_is_reproducible_from_its_seed(demo: Engine, tmp_path: Any) -> None:
    from pxp.analysis.report import report_json
    from pxp.storage.schema import upgrade
    from pxp.storage.store import make_engine

    again = make_engine(f"sqlite:///{tmp_path / 'again.db'}")
    upgrade(again)
    ensure_demo(again)
    for name in DEMO_EXPERIMENTS.values():
        first, second = report_json(demo, name), report_json(again, name)
        assert first["metrics"] == second["metrics"] and first.get("performance") == second.get("performance"), name
    again.dispose()
