"""Small datasets built in tests (the demo and study data have their own tests)."""

from __future__ import annotations

from sqlalchemy import Engine

from pxp.models import Dataset, Instance
from pxp.store import db_session

LABELS = ["Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax"]
FINDINGS = {
    "Atelectasis": "volume loss of the right lower lobe with shift of the fissure and crowded vessels",
    "Pneumonia": "patchy airspace consolidation in the left lower zone with air bronchograms",
    "Pleural Effusion": "blunted costophrenic angle with a meniscus of fluid at the right base",
    "Cardiomegaly": "enlarged cardiac silhouette with a cardiothoracic ratio above one half",
    "Pneumothorax": "visible visceral pleural line with absent lung markings beyond it at the apex",
}
DRUGS = [
    # (target, reactants, explanation)
    ("CC(=O)Nc1ccc(O)cc1", "CC(=O)OC(C)=O.Nc1ccc(O)cc1",
     "Acetylation of the amine of 4-aminophenol with acetic anhydride gives the acetanilide."),
    ("CC(=O)Oc1ccccc1C(=O)O", "CC(=O)OC(C)=O.O=C(O)c1ccccc1O",
     "Acetylation of the phenol of salicylic acid with acetic anhydride gives the aryl acetate."),
    ("CC(C)Cc1ccc(C(C)C(=O)O)cc1", "CC(C)Cc1ccc(C(C)C#N)cc1.O",
     "Hydrolysis of the nitrile to the carboxylic acid completes the propionic acid side chain."),
]


def make_rad(engine: Engine, name: str = "toy-rad", per_label: int = 2) -> int:
    with db_session(engine) as db:
        ds = Dataset(name=name, task="rad", synthetic=True)
        db.add(ds)
        db.flush()
        o = 0
        for lab in LABELS:
            for i in range(per_label):
                o += 1
                db.add(Instance(
                    dataset_id=ds.id or 0, key=f"{lab.lower().replace(' ', '_')}_{i}", ordinal=o,
                    split=("train", "val", "test")[o % 3], label=lab, reference_prediction=lab,
                    reference_explanation=f"Case {o}: {FINDINGS[lab]}.",
                ))
        return ds.id or 0


def make_drug(engine: Engine, name: str = "toy-drug") -> int:
    with db_session(engine) as db:
        ds = Dataset(name=name, task="drug")
        db.add(ds)
        db.flush()
        for o, (target, reactants, expl) in enumerate(DRUGS, start=1):
            db.add(Instance(
                dataset_id=ds.id or 0, key=f"drug_{o}", ordinal=o, payload=target, split="train",
                reference_prediction=reactants, reference_explanation=expl,
            ))
        return ds.id or 0
