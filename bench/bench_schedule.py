"""Benchmark: calls of a 500-case study (n = 10, R = 5) on an evaluation schedule vs the paper defaults
(docs/research.md, Evaluation schedules).

The check: `--eval-every 25 --eval-sample 50` makes at most 10 % of the calls of the paper defaults
(machine performance on the whole test split after every session, LEARN on the whole validation
split after every session). The machine is the simulated one (no latency), so calls are counted,
not timed. The scheduled runs are run for real; the paper defaults are computed by formula
(`--run-defaults` runs them too, a few minutes here), from the same formula every run's
evaluation calls are checked against:

    per repetition: interaction calls
                    + LEARN: (1 + finished sessions) x |validation set|           (LEARN on)
                    + test:  checkpoints whose carried context changed x |test set|

where the checkpoints are every m-th session and the last. With LEARN off every finished
session is kept, so the defaults' test evaluations are (kept sessions) x |test split| and their
interaction calls are exactly the scheduled run's (the schedule does not change the sessions).

It also checks the cost estimate (pxp.running.pxp.controlled.estimate, docs/research.md, Cost estimate): for each
scheduled run it prints
the estimated calls beside the actual ones and the relative error (goal: within 15 %); the
evaluation calls are exact when LEARN keeps every session, the interaction calls rest on the
assumed session lengths.

    python bench/bench_schedule.py [--cases 500] [--val 100] [--test 100] [--reps 5] [--run-defaults]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)
from sqlalchemy import Engine, func
from sqlmodel import col, select

from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.estimate import dataset_facts, estimate
from pxp.running.pxp.controlled.repetition import eval_due
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session, make_engine, upgrade
from pxp.storage.tables import Dataset, Experiment, Instance, LLMCall, Run, Session

LABELS = ("alpha", "beta", "gamma", "delta")
DATASET = "bench-500"


def make_dataset(engine: Engine, train: int, val: int, test: int) -> None:
    """A free-text dataset of train + val + test cases with reference answers."""
    with db_session(engine) as db:
        ds = Dataset(name=DATASET, task="text")
        db.add(ds)
        db.flush()
        o = 0
        for split, count in (("train", train), ("val", val), ("test", test)):
            for i in range(count):
                o += 1
                lab = LABELS[o % len(LABELS)]
                db.add(Instance(dataset_id=ds.id or 0, key=f"{split}_{i}", ordinal=o, split=split,
                                payload=f"Case {o}: findings typical of {lab}.", label=lab,
                                reference_prediction=lab, reference_explanation=f"Case {o} shows {lab} signs."))


@dataclass
class Counted:
    """Calls an experiment made (interaction and evaluation) and what the formula says of them."""

    ask: int
    eval: int
    formula_eval: int
    seconds: float
    est_ask: int = 0
    est_eval: int = 0

    @property
    def total(self) -> int:
        return self.ask + self.eval

    @property
    def est_total(self) -> int:
        return self.est_ask + self.est_eval


def formula_eval_calls(engine: Engine, exp: Experiment, cfg: RunConfig, *, val_n: int, test_n: int) -> int:
    """The evaluation calls the schedule implies, from the stored sessions and LEARN decisions."""
    total = 0
    with db_session(engine) as db:
        runs = db.exec(select(Run).where(Run.experiment_id == exp.id)).all()
        for run in runs:
            rows = db.exec(select(Session.ordinal, Session.status, Session.context_kept)
                           .where(Session.run_id == run.id).order_by(col(Session.ordinal))).all()
            last = rows[-1][0] if rows else 0
            if cfg.learn and val_n:
                total += (1 + sum(1 for _, st, _ in rows if st == "finished")) * val_n
            kept = [o for o, _, k in rows if k]
            evaluated = 0
            for o, _, _ in rows:
                if eval_due(o, last, cfg.eval_every) and any(evaluated < k <= o for k in kept):
                    total += test_n
                    evaluated = o
    return total


def count(engine: Engine, exp: Experiment) -> tuple[int, int]:
    with db_session(engine) as db:
        rows = dict(db.exec(select(LLMCall.purpose, func.count()).where(LLMCall.experiment_id == exp.id)
                            .group_by(col(LLMCall.purpose))).all())
    return sum(v for k, v in rows.items() if k != "eval"), int(rows.get("eval", 0))


def run(engine: Engine, name: str, cfg: RunConfig, *, val_n: int, test_n: int) -> Counted:
    by = estimate(cfg, dataset_facts(engine, cfg)).as_json()["by_purpose"]
    exp = create_experiment(engine, cfg, name=name)
    t0 = time.perf_counter()
    out = run_experiment(engine, exp.id or 0)
    assert out.status == "finished", out
    ask, ev = count(engine, exp)
    return Counted(ask, ev, formula_eval_calls(engine, exp, cfg, val_n=val_n, test_n=test_n),
                   time.perf_counter() - t0, sum(int(d["calls"]) for k, d in by.items() if k != "eval"),
                   int(by.get("eval", {}).get("calls", 0)))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--cases", type=int, default=500, help="cases in the study (train + val + test)")
    ap.add_argument("--val", type=int, default=100, help="validation cases (LEARN)")
    ap.add_argument("--test", type=int, default=100, help="test cases (machine performance)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--eval-sample", type=int, default=50)
    ap.add_argument("--learn-sample", type=int, default=5, help="the LEARN-on scheduled run's validation sample")
    ap.add_argument("--run-defaults", action="store_true", help="also run the paper defaults (slow)")
    args = ap.parse_args()
    train = args.cases - args.val - args.test
    r, m, sample = args.reps, args.eval_every, args.eval_sample
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        upgrade(engine)
        make_dataset(engine, train, args.val, args.test)

        def cfg(**kw: object) -> RunConfig:
            base: dict[str, object] = {"dataset": DATASET, "split": "train", "reps": r, "n": args.n, "k": 3,
                                       "seed": 0, "concurrency": 16, "simulated": {"accuracy": 0.5, "adopt": 0.6}}
            return RunConfig(**{**base, **kw})  # type: ignore[arg-type]

        print(f"study: {args.cases} cases (train {train}, val {args.val}, test {args.test}), n = {args.n}, "
              f"R = {r}, simulated machine")
        rows: list[tuple[str, int, str]] = []
        checks: list[str] = []

        # LEARN off: the defaults' interaction calls are exactly the scheduled run's
        sched = run(engine, "sched-nolearn", cfg(learn=False, eval_every=m, eval_sample=sample),
                    val_n=0, test_n=min(sample, args.test))
        checks.append(f"--no-learn scheduled: eval calls {sched.eval} (formula {sched.formula_eval})")
        with db_session(engine) as db:
            kept = int(db.exec(select(func.count()).select_from(Session).join(Run)
                               .join(Experiment, col(Experiment.id) == col(Run.experiment_id))
                               .where(Experiment.name == "sched-nolearn", col(Session.context_kept).is_(True))).one())
        paper_nolearn = sched.ask + kept * args.test
        rows.append(("paper defaults, --no-learn (formula)", paper_nolearn, ""))
        rows.append((f"--eval-every {m} --eval-sample {sample}, --no-learn", sched.total,
                     f"{sched.total / paper_nolearn:.1%}"))

        # LEARN on
        ls = min(args.learn_sample, args.val)
        learn_s = run(engine, "sched-learn", cfg(learn=True, eval_every=m, eval_sample=sample, learn_sample=ls),
                      val_n=ls, test_n=min(sample, args.test))
        checks.append(f"LEARN scheduled: eval calls {learn_s.eval} (formula {learn_s.formula_eval})")
        sessions = r * train
        w = run(engine, "sched-learn-wholeval", cfg(learn=True, eval_every=m, eval_sample=sample),
                val_n=args.val, test_n=min(sample, args.test))
        checks.append(f"LEARN on the whole val split, scheduled: eval calls {w.eval:,} (formula {w.formula_eval:,}), "
                      f"{w.seconds:.0f} s")
        whole = w.total
        if args.run_defaults:
            d = run(engine, "paper-nolearn", cfg(learn=False), val_n=0, test_n=args.test)
            checks.append(f"paper defaults, --no-learn, run: {d.total:,} calls (formula {paper_nolearn:,}), "
                          f"eval calls {d.eval:,} (formula {d.formula_eval:,}), {d.seconds:.0f} s")
            p = run(engine, "paper-learn", cfg(learn=True), val_n=args.val, test_n=args.test)
            checks.append(f"paper defaults, LEARN, run: eval calls {p.eval:,} (formula {p.formula_eval:,}), "
                          f"{p.seconds:.0f} s")
            paper_learn, how = p.total, "run"
        else:
            # LEARN's decisions differ between configurations, so this is an estimate: interaction calls
            # as in the scheduled run, and the test split after every session (an upper bound)
            paper_learn = learn_s.ask + r * args.val + sessions * args.val + sessions * args.test
            how = "formula, estimate"
        rows.append((f"paper defaults, LEARN ({how})", paper_learn, ""))
        rows.append((f"--eval-every {m} --eval-sample {sample}, LEARN on the whole val split", whole,
                     f"{whole / paper_learn:.1%}"))
        rows.append((f"--eval-every {m} --eval-sample {sample} --learn-sample {ls}, LEARN",
                     learn_s.total, f"{learn_s.total / paper_learn:.1%}"))

        width = max(len(a) for a, _, _ in rows)
        print(f"{'configuration':<{width}}  {'calls':>9}  of defaults")
        for label, calls, share in rows:
            print(f"{label:<{width}}  {calls:>9,}  {share}")
        for c in checks:
            print(f"check: {c}")
        print(f"goal (≤ 10 % of the paper defaults): --no-learn {_met(sched.total <= 0.10 * paper_nolearn)}, "
              f"LEARN on the whole val split {_met(whole <= 0.10 * paper_learn)}, "
              f"LEARN with --learn-sample {ls} {_met(learn_s.total <= 0.10 * paper_learn)}")
        formula = sched.eval == sched.formula_eval and learn_s.eval == learn_s.formula_eval
        formula = formula and w.eval == w.formula_eval
        estimated = [("--no-learn", sched), (f"LEARN, --learn-sample {ls}", learn_s),
                     ("LEARN on the whole val split", w)]
        print_estimates(f"--eval-every {m} --eval-sample {sample}", estimated)
        print(f"eval calls equal the formula: {'yes' if formula else 'NO'}; "
              f"scheduled runs took {sched.seconds:.1f} s, {learn_s.seconds:.1f} s and {w.seconds:.1f} s")
    return 0


def print_estimates(schedule: str, runs: list[tuple[str, Counted]]) -> None:
    """The estimate (before the run) beside the actual calls, in total and for the evaluations alone."""
    width = max(len(schedule) + len(label) + 2 for label, _ in runs)
    print(f"{'estimate vs actual':<{width}}  {'estimated':>9}  {'actual':>9}  {'error':>6}  "
          f"{'eval est.':>9}  {'eval act.':>9}  {'within 15 %':>11}")
    for label, c in runs:
        err = (c.est_total - c.total) / c.total
        print(f"{schedule + ', ' + label:<{width}}  {c.est_total:>9,}  {c.total:>9,}  {err:>+6.1%}  "
              f"{c.est_eval:>9,}  {c.eval:>9,}  {'yes' if abs(err) <= 0.15 else 'NO':>11}")


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


if __name__ == "__main__":
    raise SystemExit(main())
