"""Grids as named studies (docs/research.md, Grids and comparisons): machines × datasets × seeds (× n, k) from one
TOML file.

The file (`pxp run --grid grid.toml`)::

    name = "pilot"                     # the study; experiments are named pilot/<machine>/<dataset>/s<seed>
    [grid]                             # the axes: every combination is one experiment
    machine = ["simulated", "anthropic:claude-haiku-4-5",
               { label = "weak", machine = "simulated", simulated = { accuracy = 0.3 } }]
    dataset = ["toy-rad"]
    seed = [0, 1]
    n = [10, 20]                       # optional; listed axes add /n<n> and /k<k> to the names
    k = [3]
    [run]                              # RunConfig options common to every experiment
    reps = 3
    learn = true

The file is checked completely (parse_grid, pure; check_study, against the database) before
any experiment is created; every problem is one line naming the file and the key. Each
experiment stores the study's name in its config (config["study"]) and its grid point
(config["grid"]), which `pxp report --study` (pxp.analysis.study) pairs by.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from pxp.protocols.errors import PxpError
from pxp.running.pxp.checks import config_errors
from pxp.running.pxp.config import DEFAULT_SPLIT, LEARN_DEFAULT, RunConfig, RunError
from pxp.running.pxp.controlled.estimate import Estimate, dataset_facts, estimate, store_estimate
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import dataset_instances, db_session, find_dataset
from pxp.storage.tables import Experiment

TOP_KEYS = ("name", "grid", "run")
AXES = ("machine", "dataset", "seed", "n", "k")
REQUIRED_AXES = ("machine", "dataset", "seed")
#: keys of a machine given as a table; `machine` is its spec, `label` its name in the study
MACHINE_KEYS = ("label", "machine", "simulated", "temperature", "max_tokens", "base_url")
#: RunConfig fields that only the grid sets
_NOT_IN_RUN = ("dataset", "machine", "seed", "extra")
_SIM_KEYS = ("accuracy", "adopt", "mislead", "latency")


class GridError(PxpError, ValueError):
    """A grid file that cannot run (its one line names the file and the key)."""


@dataclass(frozen=True)
class Point:
    """One experiment of the study: its name, its grid coordinates and its full config."""

    name: str
    coords: dict[str, Any]
    config: RunConfig


@dataclass(frozen=True)
class Study:
    """A parsed grid file: the study's name and its points, in axis order."""

    name: str
    source: str
    points: list[Point]
    #: whether [run] gives split (else each dataset's train split, as `pxp run`)
    split_given: bool = False


def _hints() -> dict[str, Any]:
    return typing.get_type_hints(RunConfig)


def _accepts(hint: Any, value: Any) -> bool:
    """Whether a TOML value fits a RunConfig field's type (bool is not an int; an int is a float)."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for a in args:
        base = typing.get_origin(a) or a
        if a is type(None) and value is None:
            return True
        if base is bool and isinstance(value, bool):
            return True
        if base is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if base in (str, dict) and isinstance(value, base):
            return True
    return False


def _type_name(hint: Any) -> str:
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    names = [getattr(typing.get_origin(a) or a, "__name__", str(a)) for a in args if a is not type(None)]
    return {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
            "dict": "a table"}.get(names[0], names[0]) if names else "a value"


def _simulated(where: str, value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise GridError(f"{where} must be a table of {', '.join(_SIM_KEYS)}")
    for key, v in value.items():
        if key not in _SIM_KEYS:
            raise GridError(f"{where}.{key} is not a known key (one of {', '.join(_SIM_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GridError(f"{where}.{key} must be a number")
    return {k: float(v) for k, v in value.items()}


def _machine(where: str, value: Any) -> dict[str, Any]:
    """One entry of the machine axis: a spec string, or a table with a label and per-machine options."""
    if isinstance(value, str) and value:
        return {"label": value, "machine": value}
    if not isinstance(value, dict):
        raise GridError(f"{where} must be a machine spec (simulated or provider:model) or a table")
    hints = _hints()
    for key, v in value.items():
        if key not in MACHINE_KEYS:
            raise GridError(f"{where}.{key} is not a known key (one of {', '.join(MACHINE_KEYS)})")
        if key == "simulated":
            continue
        if key != "label" and not _accepts(hints[key], v):
            raise GridError(f"{where}.{key} must be {_type_name(hints[key])}")
    if not isinstance(value.get("machine"), str) or not value["machine"]:
        raise GridError(f"{where}.machine is required (simulated or provider:model)")
    out = dict(value)
    if "simulated" in out:
        out["simulated"] = _simulated(f"{where}.simulated", out["simulated"])
    label = out.setdefault("label", out["machine"])
    if not isinstance(label, str) or not label:
        raise GridError(f"{where}.label must be a non-empty string")
    return out


def _axis(src: str, grid: Mapping[str, Any], key: str) -> list[Any]:
    where = f"{src}: [grid].{key}"
    values = grid[key]
    if not isinstance(values, list):
        values = [values]
    if not values:
        raise GridError(f"{where} is empty; list at least one value")
    if key == "machine":
        return [_machine(f"{where}[{i}]", v) for i, v in enumerate(values)]
    for v in values:
        ok = isinstance(v, str) and bool(v) if key == "dataset" else isinstance(v, int) and not isinstance(v, bool)
        if not ok:
            raise GridError(f"{where} must list {'dataset names' if key == 'dataset' else 'integers'} (got {v!r})")
    return list(values)


def _check_unique(src: str, key: str, labels: list[str]) -> None:
    for v in labels:
        if "/" in v:
            raise GridError(f"{src}: [grid].{key} {v!r} must not contain '/' (it is part of the experiment names)")
    dup = sorted({v for v in labels if labels.count(v) > 1})
    if dup:
        raise GridError(f"{src}: [grid].{key} lists {dup[0]!r} twice (give the machines different labels)")


def parse_grid(text: str, source: str = "grid.toml") -> Study:
    """The study a grid file describes (pure: nothing is read from the database)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{source}: not valid TOML ({e})") from None
    for key in doc:
        if key not in TOP_KEYS:
            raise GridError(f"{source}: unknown key {key!r} (one of {', '.join(TOP_KEYS)})")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise GridError(f"{source}: name is required (the study's name, a string)")
    if "/" in name:
        raise GridError(f"{source}: name {name!r} must not contain '/'")
    grid, run = doc.get("grid"), doc.get("run", {})
    if not isinstance(grid, dict):
        raise GridError(f"{source}: [grid] is required ({', '.join(REQUIRED_AXES)}; optional n, k)")
    if not isinstance(run, dict):
        raise GridError(f"{source}: run must be a table ([run])")
    for key in grid:
        if key not in AXES:
            raise GridError(f"{source}: unknown key [grid].{key} (one of {', '.join(AXES)})")
    for key in REQUIRED_AXES:
        if key not in grid:
            raise GridError(f"{source}: [grid].{key} is required")
    hints = _hints()
    common: dict[str, Any] = {}
    for key, v in run.items():
        if key not in hints or key in _NOT_IN_RUN:
            raise GridError(f"{source}: unknown key [run].{key} (RunConfig options but dataset, machine, seed)")
        if key in grid:
            raise GridError(f"{source}: [run].{key} is also a [grid] axis; give it in one place")
        if key == "simulated":
            common[key] = _simulated(f"{source}: [run].simulated", v)
        elif key == "split" and v == "all":
            common[key] = None
        elif not _accepts(hints[key], v):
            raise GridError(f"{source}: [run].{key} must be {_type_name(hints[key])}")
        else:
            common[key] = v
    common.setdefault("learn", LEARN_DEFAULT)  # as `pxp run` (RunConfig's own default is off)
    axes = {key: _axis(source, grid, key) for key in AXES if key in grid}
    _check_unique(source, "machine", [m["label"] for m in axes["machine"]])
    _check_unique(source, "dataset", list(axes["dataset"]))
    for key in ("seed", "n", "k"):
        if key in axes and len(set(axes[key])) != len(axes[key]):
            raise GridError(f"{source}: [grid].{key} lists a value twice")
    points = []
    for combo in itertools.product(*axes.values()):
        c = dict(zip(axes, combo, strict=True))
        m = c["machine"]
        fields = {**common, **{k: v for k, v in m.items() if k != "label"}, "dataset": c["dataset"],
                  "seed": c["seed"], **{k: c[k] for k in ("n", "k") if k in c}}
        if "simulated" in m:
            fields["simulated"] = {**common.get("simulated", {}), **m["simulated"]}
        cfg = RunConfig(**fields)
        if cfg.machine != "simulated":
            cfg = dataclasses.replace(cfg, simulated={})
        exp_name = "/".join([name, m["label"], c["dataset"], f"s{c['seed']}",
                         *(f"{k}{c[k]}" for k in ("n", "k") if k in c)])
        coords = {"machine": m["label"], "dataset": c["dataset"], "seed": c["seed"], "n": cfg.n, "k": cfg.k}
        errs = config_errors(cfg)
        if errs:
            raise GridError(f"{source}: {exp_name}: {errs[0]}")
        points.append(Point(exp_name, coords, cfg))
    return Study(name, source, points, "split" in common)


def read_grid(path: Path) -> Study:
    """parse_grid of a file (one line when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise GridError(f"{path}: cannot read the grid file ({e.__class__.__name__})") from None
    return parse_grid(text, str(path))


def resolve_splits(engine: Engine, study: Study) -> Study:
    """The points with `split` resolved as `pxp run` does: train if the dataset has one, else every instance.

    Only points whose [run] leaves split unset are changed (RunConfig's default, None, is every instance).
    """
    points = []
    for p in study.points:
        cfg = p.config
        if not study.split_given:
            with db_session(engine) as db:
                ds = find_dataset(db, name=cfg.dataset)
                if ds is not None and ds.id is not None and dataset_instances(db, dataset_id=ds.id,
                                                                              split=DEFAULT_SPLIT):
                    cfg = dataclasses.replace(cfg, split=DEFAULT_SPLIT)
        points.append(Point(p.name, p.coords, cfg))
    return Study(study.name, study.source, points, True)


def prepare_study(engine: Engine, path: Path) -> tuple[Study, dict[str, Estimate]]:
    """Read, resolve and check a grid file, and estimate each experiment; nothing is created."""
    study = resolve_splits(engine, read_grid(path))
    return study, check_study(engine, study)


def check_study(engine: Engine, study: Study) -> dict[str, Estimate]:
    """Check every point against the database (datasets, splits, free names) and estimate it.

    Raises GridError (one line) before anything is created.
    """
    with db_session(engine) as db:
        taken = set(db.exec(select(Experiment.name).where(col(Experiment.name).startswith(f"{study.name}/"))).all())
    estimates: dict[str, Estimate] = {}
    for p in study.points:
        if p.name in taken:
            raise GridError(f"{study.source}: an experiment named {p.name!r} already exists (study {study.name!r} "
                            "has run; choose another name, or `pxp run --resume` that experiment)")
        try:
            facts = dataset_facts(engine, p.config)
        except RunError as e:
            raise GridError(f"{study.source}: [grid].dataset: {e}") from None
        if facts.interact == 0:
            where = f" in split {p.config.split!r}" if p.config.split else ""
            raise GridError(f"{study.source}: [grid].dataset: dataset {p.config.dataset!r} has no instances{where}")
        estimates[p.name] = estimate(p.config, facts)
    return estimates


def create_study(engine: Engine, study: Study, estimates: Mapping[str, Estimate]) -> list[Experiment]:
    """Create one experiment per point (checked first by check_study), recording the study in each config."""
    out = []
    for p in study.points:
        exp = create_experiment(engine, p.config, name=p.name)
        with db_session(engine) as db:
            row = db.get(Experiment, exp.id)
            if row is not None:
                row.config = {**row.config, "study": study.name, "grid": dict(p.coords)}
                db.add(row)
        if p.name in estimates:
            store_estimate(engine, exp.id or 0, estimates[p.name])
        out.append(exp)
    return out


def study_estimate(study: Study, estimates: Mapping[str, Estimate]) -> dict[str, Any]:
    """The estimate of the whole study: each experiment's, and their sum (cost None if any is unknown)."""
    rows = [{"experiment": p.name, **estimates[p.name].as_json()} for p in study.points]
    costs = [r["usd"] for r in rows]
    total = {
        "experiments": len(rows),
        **{k: sum(int(r[k]) for r in rows) for k in ("calls", "tokens_in", "tokens_out")},
        "usd": None if any(c is None for c in costs) else round(sum(float(c) for c in costs), 6),
    }
    return {"study": study.name, "experiments": rows, "total": total}


def study_estimate_lines(est: Mapping[str, Any]) -> list[str]:
    """The study's estimate as a text table, one line per experiment and the total."""
    def num(v: Any, usd: bool = False) -> str:
        return "unknown" if v is None else (f"${v:,.2f}" if usd else f"{round(v):,}")

    head = ("Experiment", "calls", "tokens in", "tokens out", "US$")
    body = [(r["experiment"], num(r["calls"]), num(r["tokens_in"]), num(r["tokens_out"]), num(r["usd"], True))
            for r in est["experiments"]]
    t = est["total"]
    body.append((f"study {est['study']} ({t['experiments']} experiments)", num(t["calls"]), num(t["tokens_in"]),
                 num(t["tokens_out"]), num(t["usd"], True)))
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    return ["Estimate (before the runs)", *("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                                      for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                                            for row in (head, *body)),
            "Assumptions: as `pxp run --estimate` for each experiment (--format json lists them)."]
