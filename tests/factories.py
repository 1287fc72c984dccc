"""Small datasets built in tests (the demo and study data have their own tests)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Engine

from pxp.storage.store import db_session
from pxp.storage.tables import Dataset, Instance

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


def make_rad_images(
    engine: Engine, name: str = "toy-rad-img", per_label: int = 1, size: tuple[int, int] = (2400, 2000),
    labels: list[str] | None = None,
) -> int:
    """A RAD dataset whose instances carry a Pillow-made PNG (an Asset), larger than Claude's limit."""
    import hashlib
    import io

    from PIL import Image, ImageDraw

    from pxp.storage.tables import Asset

    labels = labels or LABELS
    with db_session(engine) as db:
        ds = Dataset(name=name, task="rad", synthetic=True, config={"labels": list(labels)})
        db.add(ds)
        db.flush()
        o = 0
        for lab in labels:
            for i in range(per_label):
                o += 1
                img = Image.new("L", size, color=20)
                ImageDraw.Draw(img).ellipse((size[0] // 4, size[1] // 4, size[0] // 2 + o * 10, size[1] // 2), fill=200)
                buf = io.BytesIO()
                img.save(buf, format="PNG")
                data = buf.getvalue()
                sha = hashlib.sha256(data).hexdigest()
                if db.get(Asset, sha) is None:
                    db.add(Asset(sha256=sha, mime="image/png", width=size[0], height=size[1], size=len(data),
                                 data=data))
                    db.flush()
                db.add(Instance(
                    dataset_id=ds.id or 0, key=f"img_{lab.lower().replace(' ', '_')}_{i}", ordinal=o,
                    split=("train", "val", "test")[o % 3], label=lab, asset_sha256=sha,
                    reference_prediction=lab, reference_explanation=f"Case {o}: {FINDINGS[lab]}.",
                ))
        return ds.id or 0


def make_text(engine: Engine, name: str = "toy-text", per_split: int = 3) -> int:
    """A free-text task with train/val/test splits and no images (LLM runs against a local server)."""
    with db_session(engine) as db:
        ds = Dataset(name=name, task="text")
        db.add(ds)
        db.flush()
        o = 0
        for split in ("train", "val", "test"):
            for i in range(per_split):
                o += 1
                lab = LABELS[o % len(LABELS)]
                db.add(Instance(
                    dataset_id=ds.id or 0, key=f"{split}_{i}", ordinal=o, split=split, payload=f"Case {o}.",
                    label=lab, reference_prediction=lab, reference_explanation=f"Case {o}: {FINDINGS[lab]}.",
                ))
        return ds.id or 0


def race(n: int, fn):  # type: ignore[no-untyped-def]
    """Run fn(0..n-1) in n threads released at once; their results (any exception fails the test)."""
    barrier = threading.Barrier(n)
    out: list[object] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            out[i] = fn(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def fit_content(tags: Sequence[tuple[str, str]], pool: Sequence[str] = ("p", "q", "r", "s")) -> list[str]:
    """Predictions (from `pool`) for a session's (sender, tag) list that make each tag true to
    its content (DESIGN §1, facts from content): RATIFY takes the other's latest prediction,
    REVISE a new one, REFUTE and REJECT keep their own (or, first, differ from the other's)."""
    preds: list[str] = []
    for i, (sender, tag) in enumerate(tags):
        tag = tag.upper()
        other = preds[i - 1] if i >= 1 else ""
        own = preds[i - 2] if i >= 2 else None
        if i == 0:
            p = pool[0]
        elif tag == "RATIFY":
            p = other if sender.startswith("h") or own is None else own
        elif tag == "REVISE":
            p = next(x for x in pool if x not in (own, other)) if sender.startswith("h") else other
        else:
            p = own if own is not None else next(x for x in pool if x != other)
        preds.append(p)
    return preds


def live_session_at_j2(engine: Engine, dataset: str, annotator: str = "r") -> int:
    """A live session on `dataset` claimed by `annotator`, the machine's INIT stored: the human's turn."""
    from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
    from pxp.running.pxp.live.turns import machine_for, machine_step

    eid = create_live_experiment(engine, dataset=dataset)
    sid = claim_next(engine, experiment_id=eid, annotator_id=ensure_annotator(engine, name=annotator))
    assert sid is not None
    machine_step(engine, sid, machine_for(engine, eid))
    return sid


#: session shapes of a study in the transcripts format: ratified at once, refuted then revised, rejected
STUDY_SHAPES = (
    (("machine", "INIT"), ("human", "RATIFY"), ("machine", "RATIFY")),
    (("machine", "INIT"), ("human", "REFUTE"), ("machine", "REVISE"), ("human", "RATIFY"), ("machine", "RATIFY")),
    (("machine", "INIT"), ("human", "REFUTE"), ("machine", "REFUTE"), ("human", "REJECT")),
)
#: a session aborted after its INIT (no parseable reply): one message, the cheapest session to store
ABORTED = (("machine", "INIT"),)


def write_study(path: Path, sessions: int, *, reps: int = 2, instances: int = 500, annotators: int = 7,
                shapes: Sequence[Sequence[tuple[str, str]]] = STUDY_SHAPES) -> Path:
    """A transcripts file (DESIGN §6) of `sessions` conformant sessions, session i of shape i mod len(shapes)
    (ABORTED ones aborted), spread over repetitions, instances and annotators, explanations of about a
    hundred characters; for `import_transcripts`, the fast path (COPY on PostgreSQL) to a study of any size."""
    import json

    filled = [list(zip(shape, fit_content(shape, ("Pneumonia", "Atelectasis", "Cardiomegaly")), strict=True))
              for shape in shapes]
    with path.open("w", encoding="utf-8") as f:
        for i in range(sessions):
            for j, ((sender, tag), pred) in enumerate(filled[i % len(filled)], start=1):
                f.write(json.dumps({
                    "session": f"s{i}", "instance": f"x{i % instances}", "j": j, "sender": sender, "tag": tag,
                    "prediction": pred, "repetition": i % reps + 1, "annotator": f"a{i % annotators}",
                    "explanation": f"{FINDINGS[LABELS[(i + len(sender)) % 5]]}, as seen on film {i}",
                    "status": "aborted" if len(filled[i % len(filled)]) == 1 else "finished",
                }) + "\n")
    return path
