"""`pxp demo`: load the demo datasets made by pxp and a finished simulated experiment on each.

The datasets are read from data/ (made by `python -m pxp.data.demo.make_demo`) through
the same study importers users run. Each experiment is a controlled run of the
simulated machine-agent against the database human-proxy (INTERACT over R
repetitions), so the app has something to show with no API key. Idempotent: what
is already there is left alone; `add_demo` adds all of it or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.data.demo.make_demo import DATA_DIR
from pxp.data.importers.study import import_study_drug, import_study_rad
from pxp.running.pxp.config import DEFAULT_SPLIT, LEARN_DEFAULT
from pxp.storage.tables import Dataset, Experiment

DEMO_RAD = "demo-rad"
DEMO_DRUG = "demo-drug"
#: 2048-px 12-bit DICOM chest films (pxp.data.demo.films), made at `pxp demo --films` time, not shipped
DEMO_FILMS = "demo-rad-films"
DEMO_EXPERIMENTS = {DEMO_RAD: "demo-rad-simulated", DEMO_DRUG: "demo-drug-simulated"}
DEMO_REPS = 3
#: the demo's runs use what a user's first run uses (`pxp run` and the Experiments page: the train split, LEARN
#: on), so a first Compare against them pairs (docs/research.md, Controlled runs)
DEMO_SPLIT = DEFAULT_SPLIT
#: what ensure_demo makes, in order, as its progress names it (the app's first start shows it)
DEMO_STEPS = (
    f"the {DEMO_RAD} dataset (synthetic chest X-ray phantoms)",
    f"the {DEMO_DRUG} dataset (approved drugs and a one-step synthesis of each)",
    *(f"{name}, the simulated agent's run on {ds} ({DEMO_REPS} repetitions)" for ds, name in DEMO_EXPERIMENTS.items()),
)


def demo_dir() -> Path:
    """Where the demo files are: pxp/data/demo_data/ inside the package, as written by make_demo."""
    return DATA_DIR


def _exists(engine: Engine, model: type[Dataset] | type[Experiment], name: str) -> bool:
    with DB(engine) as db:
        return db.exec(select(model).where(model.name == name)).first() is not None


def ensure_demo(engine: Engine, *, data_dir: Path | None = None,
                progress: Callable[[int, str], None] | None = None) -> bool:
    """Load the demo datasets and their simulated experiments if missing; True if it loaded any. `progress` is told
    each step of DEMO_STEPS (its index and name) as it starts."""
    from pxp.running.pxp.config import RunConfig, RunError
    from pxp.running.pxp.controlled.runner import run_experiment
    from pxp.running.pxp.experiments import create_experiment

    root = data_dir or demo_dir()
    try:
        return _load(engine, root, RunConfig, create_experiment, run_experiment, progress or (lambda _i, _s: None))
    except (IntegrityError, RunError):
        # another process (an app replica) is loading the demo at the same moment
        if all(_exists(engine, Experiment, n) for n in DEMO_EXPERIMENTS.values()):
            return False
        raise


def _load(engine: Engine, root: Path, RunConfig: Any, create_experiment: Any,
          run_experiment: Any, progress: Callable[[int, str], None]) -> bool:
    loaded = False
    progress(0, DEMO_STEPS[0])
    if not _exists(engine, Dataset, DEMO_RAD):
        import_study_rad(
            engine, root / "demo-rad" / "cases.csv", name=DEMO_RAD, synthetic=True,
            description="Synthetic chest-radiograph phantoms made by pxp (not patients): "
            "five findings, templated reports.",
        )
        loaded = True
    progress(1, DEMO_STEPS[1])
    if not _exists(engine, Dataset, DEMO_DRUG):
        import_study_drug(
            engine, root / "demo-drug" / "drugs.csv", name=DEMO_DRUG,
            few_shot=root / "demo-drug" / "few_shot.csv",
            description="Approved drugs (MW 150-300, aromatic) with a textbook one-step "
            "disconnection, curated by pxp.",
        )
        loaded = True
    for i, (dataset, name) in enumerate(DEMO_EXPERIMENTS.items(), start=2):
        progress(i, DEMO_STEPS[i])
        if _exists(engine, Experiment, name):
            continue
        cfg = RunConfig(dataset=dataset, split=DEMO_SPLIT, machine="simulated", human="proxy",
                        reps=DEMO_REPS, n=10, k=3, seed=0, learn=LEARN_DEFAULT)
        exp = create_experiment(engine, cfg, name=name)
        run_experiment(engine, exp.id or 0)
        loaded = True
    return loaded


def demo_state(engine: Engine) -> str:
    """"none", "half" (some of the demo's datasets and experiments, left by a failed run of an older pxp) or
    "whole"."""
    names: list[tuple[type[Dataset] | type[Experiment], str]] = [(Dataset, DEMO_RAD), (Dataset, DEMO_DRUG)]
    have = [_exists(engine, m, n) for m, n in [*names, *((Experiment, n) for n in DEMO_EXPERIMENTS.values())]]
    return "whole" if all(have) else "half" if any(have) else "none"


def add_demo(engine: Engine, *, films: bool = False, direct: bool = False) -> tuple[bool, bool]:
    """`pxp demo`: (made the films, loaded the demo), all of it or nothing (docs/operations.md, Databases).

    What is missing is made in a database of its own first and added to `engine` in one transaction
    (pxp.storage.transfer), so a failure leaves `engine` as it was. `direct`: `engine` is itself a new file that is
    kept only whole, made in place. A demo found half made is finished in place."""
    import tempfile

    from pxp.storage.store import forget_engine, get_engine
    from pxp.storage.transfer import add_all

    want_films = films and not _exists(engine, Dataset, DEMO_FILMS)
    state = demo_state(engine)
    if direct or state == "half":
        made = want_films and ensure_demo_films(engine)
        return made, ensure_demo(engine)
    if not want_films and state == "whole":
        return False, False
    with tempfile.TemporaryDirectory(prefix="pxp-demo-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'demo.db'}"
        try:
            stage = get_engine(url)
            if want_films:
                ensure_demo_films(stage)
            if state == "none":
                ensure_demo(stage)
            try:
                add_all(stage, engine)
            except IntegrityError:  # another process (an app replica) added the same demo at the same moment
                if demo_state(engine) != "whole" or (want_films and not _exists(engine, Dataset, DEMO_FILMS)):
                    raise
                return False, False
        finally:
            forget_engine(url)
    return want_films, state == "none"


def ensure_demo_films(engine: Engine) -> bool:
    """Make the demo films (one per finding) and import them through the DICOM importer, if missing; True if it
    loaded them. About 15 s: they are made on request (`pxp demo --films`), not at the app's first start."""
    import tempfile

    from pxp.data.demo.films import write_films
    from pxp.data.importers.dicom import import_dicom

    if _exists(engine, Dataset, DEMO_FILMS):
        return False
    with tempfile.TemporaryDirectory(prefix="pxp-films-") as tmp:
        labels = write_films(Path(tmp))
        import_dicom(engine, labels, name=DEMO_FILMS, source="made by pxp (pxp.data.demo.films)")
    with DB(engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == DEMO_FILMS)).one()
        ds.synthetic = True
        ds.description = ("Synthetic chest films made by pxp (not patients): 2048 × 2048, 12-bit DICOM with "
                          "lung, soft-tissue and bone windows.")
        db.add(ds)
        db.commit()
    return True
