"""Creating experiments, controlled or live (the follow-up paper's Method; DESIGN §1, §3).

One function stores every experiment. A controlled experiment stores its full config
(with the task's prompts and the resolved splits) and R runs whose sessions are created
up front in the recorded instance order, so a run can be resumed from the database alone.
A live experiment stores one run whose instance order is the queue annotators claim from
(pxp.running.pxp.live.assignment); its sessions are created by the claims. Its config also
holds `overlap` (how many distinct annotators annotate each case, docs/research.md, Live experiments and overlap) and,
when
given, `case_lists`: the instance ids each annotator may be served.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.protocols.text import TextRefused, identity
from pxp.running.pxp.checks import check_config
from pxp.running.pxp.config import RunConfig, RunError, rep_seed, sample_ids
from pxp.running.pxp.factory import dataset_task
from pxp.storage.store import dataset_instances, db_session, experiment_name_taken, find_dataset
from pxp.storage.tables import Dataset, Experiment, Instance, Run, Session

Mode = Literal["controlled", "live"]


def unique_name(engine: Engine, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... the first name no experiment has yet."""
    with db_session(engine) as db:
        taken = set(db.exec(select(Experiment.name).where(col(Experiment.name).startswith(base))).all())
    if base not in taken:
        return base
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def _prompt_templates(db: DB, ds: Dataset) -> dict[str, Any]:
    """The prompts the LLM roles use for this dataset's task (stored with the config)."""
    try:
        spec = dataset_task(db, ds)
        return {
            "system": spec.system_prompt(),
            "instance": spec.instance,
            "instance_short": spec.instance_short,
            "checker": spec.checker_prompt(),
            "few_shot": len(spec.few_shot),
            "max_tokens": spec.max_tokens,
        }
    except Exception as e:  # a task config that cannot build prompts fails later, with its own message
        return {"error": f"{type(e).__name__}: {e}"}


def _default_name(engine: Engine, cfg: RunConfig, mode: Mode) -> str:
    if mode == "live":
        return unique_name(engine, f"live-{cfg.dataset}")
    return unique_name(engine, f"{cfg.dataset}-{cfg.machine.split(':')[0]}-s{cfg.seed}")


def _controlled_config(db: DB, ds: Dataset, cfg: RunConfig, instances: list[Instance]) -> dict[str, Any]:
    """The stored config of a controlled run: the options, the task's prompts and the resolved splits."""
    val_ids = _split_ids(db, ds, cfg.val_split)
    test_ids = _split_ids(db, ds, cfg.test_split)
    n_val, n_test = len(val_ids), len(test_ids)
    notes = []
    if cfg.learn and n_val == 0:
        notes.append(
            f"no instances in validation split {cfg.val_split!r}: LEARN cannot check, "
            "every session's context is kept"
        )
    if n_test == 0:
        notes.append(f"no instances in test split {cfg.test_split!r}: machine performance is not evaluated")
    if cfg.split is None and (n_val or n_test):
        notes.append("the agents interact on every instance, including the validation and test splits")
    config = cfg.as_dict()
    config["task"] = ds.task
    config["prompts"] = _prompt_templates(db, ds)
    config["resolved"] = {
        "interact": {"split": cfg.split, "instances": len(instances)},
        "val": {"split": cfg.val_split, "instances": n_val, "used": bool(cfg.learn and n_val),
                **_sample(val_ids, cfg.learn_sample, cfg.seed, "val")},
        "test": {"split": cfg.test_split, "instances": n_test, **_sample(test_ids, cfg.eval_sample, cfg.seed, "test")},
        "notes": notes,
    }
    return config


def _case_lists(lists: Mapping[str, Sequence[str]], instances: list[Instance], overlap: int) -> dict[str, list[int]]:
    """Per-annotator case lists (annotator name → instance keys) as instance ids, checked."""
    by_key = {i.key: i.id or 0 for i in instances}
    out: dict[str, list[int]] = {}
    unknown: list[str] = []
    for who, keys in lists.items():
        name = " ".join(str(who).split())
        ids = out.setdefault(name, [])
        for key in keys:
            if key not in by_key:
                unknown.append(key)
            elif by_key[key] not in ids:
                ids.append(by_key[key])
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise RunError(f"the case lists name cases not in the experiment: {', '.join(unknown[:3])}{more}")
    if not out or "" in out or not all(out.values()):
        raise RunError("every row of the case lists needs an annotator and a case")
    listed: dict[int, int] = {}
    for ids in out.values():
        for iid in ids:
            listed[iid] = listed.get(iid, 0) + 1
    crowded = [i.key for i in instances if listed.get(i.id or 0, 0) > overlap]
    if crowded:
        raise RunError(f"case {crowded[0]!r} is listed for {listed[by_key[crowded[0]]]} annotators, "
                       f"more than the overlap {overlap}")
    return out


def _split_ids(db: DB, ds: Dataset, split: str | None) -> list[int]:
    return [i.id or 0 for i in dataset_instances(db, dataset_id=ds.id or 0, split=split)] if split else []


def _sample(ids: list[int], size: int | None, seed: int, which: str) -> dict[str, list[int]]:
    """{"sample": the seeded sample of a split's instance ids} (docs/research.md, Evaluation schedules); {} for the
    whole split."""
    return {"sample": sample_ids(ids, size, seed, which)} if size is not None and size < len(ids) else {}


#: the most cases a live experiment keeps ready ahead of an annotator (each is an open session and its INIT)
MAX_PREPARE = 5


def create_experiment(
    engine: Engine, cfg: RunConfig, *, name: str | None = None, mode: Mode = "controlled",
    overlap: int = 1, case_lists: Mapping[str, Sequence[str]] | None = None, prepare: int | None = None,
) -> Experiment:
    """Store an experiment and its runs, in instance order (seeded shuffle per repetition).

    controlled: the config is checked first (pxp.running.pxp.checks), R runs are stored with
    every session, and the resolved splits (how many instances each holds, and what
    happens when one is empty) are stored with the config under "resolved".
    live: one running Run whose instance order is the claim queue; no sessions yet; each case
    is served to `overlap` distinct annotators, and `case_lists` (annotator → instance keys)
    restricts what each listed annotator is served; `prepare` cases are kept ready ahead of each
    annotator (pxp.running.pxp.live.prepare; None: the default, 1).
    Raises RunError (one line) for a bad config, an unknown dataset or a taken name.
    """
    if mode == "controlled":
        check_config(cfg)
    if not 1 <= overlap <= 100:
        raise RunError(f"the overlap must be between 1 and 100 annotators per case, got {overlap}")
    if mode != "live" and (overlap != 1 or case_lists or prepare is not None):
        raise RunError("overlap, case lists and preparation apply to live experiments only")
    if prepare is not None and not 0 <= prepare <= MAX_PREPARE:
        raise RunError(f"cases prepared ahead must be between 0 (off) and {MAX_PREPARE}, got {prepare}")
    try:
        name = identity(name or "", "the experiment's name").text or _default_name(engine, cfg, mode)
    except TextRefused as err:
        raise RunError(str(err)) from None
    with db_session(engine) as db:
        ds = find_dataset(db, name=cfg.dataset)
        if ds is None or ds.id is None:
            raise RunError(f"no dataset named {cfg.dataset!r}; import one or run `pxp demo`")
        taken = experiment_name_taken(db, name)
        if taken is not None:
            raise RunError(taken)
        instances = dataset_instances(db, dataset_id=ds.id, split=cfg.split)
        if not instances:
            where = f" in split {cfg.split!r}" if cfg.split else ""
            raise RunError(f"dataset {cfg.dataset!r} has no instances{where}")
        live = mode == "live"
        config = cfg.as_dict() if live else _controlled_config(db, ds, cfg, instances)
        if live:
            config["overlap"] = overlap
            if case_lists:
                config["case_lists"] = _case_lists(case_lists, instances, overlap)
            if prepare is not None:
                config["prepare"] = prepare
        exp = Experiment(name=name, task=ds.task, mode=mode, status="running" if live else "created",
                         n=cfg.n, k=cfg.k, config=config)
        db.add(exp)
        db.flush()
        for r in range(1, cfg.reps + 1):
            order = [i.id for i in instances if i.id is not None]
            if cfg.shuffle:
                random.Random(rep_seed(cfg.seed, r)).shuffle(order)
            run = Run(experiment_id=exp.id or 0, repetition=r, seed=rep_seed(cfg.seed, r), instance_order=order,
                      status="running" if live else "created")
            db.add(run)
            db.flush()
            if not live:
                for ordinal, iid in enumerate(order, start=1):
                    db.add(Session(run_id=run.id or 0, instance_id=iid, ordinal=ordinal, n=cfg.n, k=cfg.k))
    return exp


def experiment_notes(exp: Experiment) -> list[str]:
    """What create_experiment noted about the splits (empty splits, overlaps)."""
    return list((exp.config.get("resolved") or {}).get("notes") or [])
