"""Machine performance (DESIGN §7; follow-up paper, Fig. 2): the stored evaluations of the
selection's runs and their median, min and max over repetitions after each session."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, select

from pxp.analysis.queries import EV, E, R, Selection, cached
from pxp.running.pxp.series import Score, carry_forward


def evaluations(engine: Engine, sel: Selection, split: str = "test") -> pd.DataFrame:
    """Evaluation rows (machine performance after each session) for the selection's runs."""

    def compute() -> pd.DataFrame:
        frm = EV.join(R, R.c.id == EV.c.run_id).join(E, E.c.id == R.c.experiment_id)
        conds = [EV.c.split == split]
        if sel.experiments:
            conds.append(R.c.experiment_id.in_(sel.experiments))  # bounded: picked
        if sel.repetitions:
            conds.append(R.c.repetition.in_(sel.repetitions))  # bounded: picked
        q = (
            select(E.c.name.label("experiment"), R.c.repetition, EV.c.after_session,
                   EV.c.prediction_accuracy.label("prediction"),
                   EV.c.explanation_accuracy.label("explanation"), EV.c.both_accuracy.label("both"),
                   EV.c.instances)
            .select_from(frm).where(*conds).order_by(E.c.name, R.c.repetition, EV.c.after_session)
        )
        with engine.connect() as c:
            return pd.DataFrame(c.execute(q).mappings().all(), columns=[
                "experiment", "repetition", "after_session", "prediction", "explanation", "both", "instances"])

    return cached(engine, "evaluations", (sel, split), compute).copy()


PERFORMANCE = ("prediction", "explanation", "both")


def performance_median(df: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max over repetitions of each accuracy, per experiment and sessions processed.

    As in pxp.running.pxp.series.performance_series: a run is evaluated only after the sessions whose
    context it kept, so its performance after session i is its latest evaluation at or before i.
    """
    cols = ["experiment", "after_session", *PERFORMANCE, *(f"{m}_{a}" for a in ("min", "max") for m in PERFORMANCE)]
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for exp, d in df.groupby("experiment", sort=True):
        per_run = {
            rep: [(int(r.after_session), Score(r.prediction, r.explanation, r.both, int(r.instances)))
                  for r in dr.itertuples()]
            for rep, dr in d.groupby("repetition")
        }
        points, agg = carry_forward(per_run)
        res = pd.DataFrame({"experiment": exp, "after_session": points})
        for m in PERFORMANCE:
            res[m] = agg["median"][m]
            res[f"{m}_min"] = agg["min"][m]
            res[f"{m}_max"] = agg["max"][m]
        out.append(res)
    return pd.concat(out, ignore_index=True)[cols]

