"""Import the published PXP study formats as they are (DESIGN §6).

RAD: `case,label,label_short,img_path,report,link` — img_path relative to the images
root (by default the folder that holds the CSV's folder, as in the published archive
where paths read `data/xrays/<file>`); one image may serve several rows and is stored
once. DRUG: `output,input,explanation` — input is the target SMILES, output the
reactants (dot-separated); every SMILES is parsed with RDKit. Optional columns
`split` and `name` are read when present.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from pxp.data.chem import InvalidSmiles, canonical_smiles, smiles_size_problem
from pxp.data.images import ImageCache, ImageRejected, resolve_inside
from pxp.data.importers.common import (
    ImportProblems,
    ImportResult,
    NewInstance,
    Problems,
    check_split,
)
from pxp.data.importers.reading import CsvRows, Meter, ProgressFn, csv_row_hash, read_csv
from pxp.data.importers.stage import store_instances, store_twice
from pxp.data.match import label_in, label_set
from pxp.protocols.text import TextRefused, clean_name, clean_text

RAD_COLUMNS = ("case", "label", "img_path", "report")
DRUG_COLUMNS = ("output", "input", "explanation")


def default_images_root(csv_path: Path, img_paths: list[str]) -> Path:
    """The CSV's folder or its parent: whichever the first image path resolves under."""
    for root in (csv_path.parent, csv_path.parent.parent):
        for p in img_paths[:1]:
            try:
                if resolve_inside(root, p, where="").is_file():
                    return root
            except ImageRejected:
                continue
    first = img_paths[0].replace("\\", "/").split("/")[0] if img_paths else ""
    return csv_path.parent.parent if first == csv_path.parent.name else csv_path.parent


def import_study_rad(
    engine: Engine,
    csv_path: Path,
    *,
    images_root: Path | None = None,
    name: str | None = None,
    split: str | None = None,
    synthetic: bool = False,
    description: str = "",
    progress: ProgressFn | None = None,
) -> ImportResult:
    """Validate the study's X-ray CSV and its images while storing them (nothing on error).

    Instances: one per row, key = case (`case#2`, ... for a case's later rows;
    a row identical to an earlier one is imported once), label = reference
    prediction, report = reference explanation; the image is a content-addressed Asset.
    """
    csv_path = Path(csv_path)
    meter = Meter(progress)

    def store(direct: bool) -> ImportResult:
        rows = CsvRows(csv_path, required=RAD_COLUMNS, label="X-ray CSV", meter=meter)
        stream = iter(rows)
        first = next(stream, None)
        problems: list[str] = Problems()
        fixed_split = check_split(split, "--split", problems)
        root = Path(images_root) if images_root is not None else default_images_root(
            csv_path, [first[1]["img_path"]] if first else [])
        if images_root is not None and not root.is_dir():
            raise ImportProblems([f"images root {root} is not a folder"])
        labels: list[str] = []
        short: dict[str, str] = {}
        items = _rad_items(csv_path, rows, itertools.chain([first] if first else [], stream), problems,
                           ImageCache(root), fixed_split if split else None, bool(split), synthetic,
                           labels, short)
        return store_instances(
            engine, name=name or csv_path.stem, task="rad", items=items, synthetic=synthetic,
            description=description or f"X-ray cases from {csv_path.name}", problems=problems,
            source=str(csv_path), config={"labels": labels, "label_short": short},
            repeats=(csv_path.name, "case"), meter=meter, direct=direct,
        )

    return store_twice(meter, store)


def _rad_items(csv_path: Path, reader: CsvRows, rows: Iterable[tuple[int, dict[str, str]]],
               problems: list[str], cache: ImageCache, fixed_split: str | None, split_given: bool,
               synthetic: bool, labels: list[str], short: dict[str, str]) -> Iterator[NewInstance]:
    allowed = label_set(None, csv_path.name)
    for line, r in rows:
        where = f"{csv_path.name}:{line}"
        try:
            case, label = clean_name(r["case"], f"{where}: case"), clean_name(r["label"], f"{where}: label")
            report = clean_text(r["report"].strip(), f"{where}: report")
            label_short = clean_name(r.get("label_short", ""), f"{where}: label_short")
            link = clean_name(r.get("link", ""), f"{where}: link")
        except TextRefused as err:
            problems.append(str(err))
            continue
        missing = [c for c, v in (("case", case), ("label", label), ("img_path", r["img_path"]),
                                  ("report", report)) if not v.strip()]
        if missing:
            problems.append(f"{where}: empty {', '.join(missing)}")
            continue
        try:
            img = cache.load(r["img_path"], where=where)
        except ImageRejected as err:
            problems.append(str(err))
            continue
        known = label_in(allowed, label, where)
        if isinstance(known, TextRefused):  # the study's five findings (docs/operations.md, Importing data)
            problems.append(str(known))
            continue
        label = known
        row_split = fixed_split if split_given else check_split(r.get("split"), where, problems)
        if label not in labels:
            labels.append(label)
        if label_short:
            short[label] = label_short
        meta: dict[str, Any] = {"case": case, "file": r["img_path"].strip(), "row": line}
        if link:
            meta["link"] = link
        if label_short:
            meta["label_short"] = label_short
        if synthetic:
            meta["synthetic"] = True
        yield NewInstance(key=case, split=row_split, image=img, label=label,
                          reference_prediction=label, reference_explanation=report,
                          meta=meta, line=line, row_hash=csv_row_hash(r))
    if reader.problems:
        problems[:] = reader.problems


def smiles_problem(smiles: str, what: str) -> str | None:
    """None if every dot-separated part parses with RDKit, else a reason (sizes checked first)."""
    too_large = smiles_size_problem(smiles)
    if too_large:
        return f"{what}: {too_large}"
    parts = [p for p in smiles.strip().split(".") if p]
    if not parts:
        return f"empty {what} SMILES"
    for p in parts:
        try:
            canonical_smiles(p)
        except InvalidSmiles:
            return f"invalid {what} SMILES {p!r}"
    return None


def _drug_problem(where: str, r: dict[str, str]) -> str | None:
    """Why a row's SMILES cannot be read (the text rule first, then RDKit), or None; the row's
    input, output and explanation are replaced by their values under the text rule."""
    try:
        r["input"], r["output"] = clean_name(r["input"], f"{where}: input"), clean_name(r["output"], f"{where}: output")
        r["explanation"] = clean_text(r["explanation"], f"{where}: explanation")
    except TextRefused as err:
        return str(err)
    bad = [p for p in (smiles_problem(r["input"], "target (input)"),
                       smiles_problem(r["output"], "reactant (output)")) if p]
    return f"{where}: {'; '.join(bad)}" if bad else None


def read_few_shot(path: Path) -> list[dict[str, str]]:
    """Few-shot examples (`output,input,explanation[,matchOK]`) as target/reactants/explanation."""
    path = Path(path)
    rows = read_csv(path, required=DRUG_COLUMNS, label="few-shot CSV")
    problems = [p for line, r in rows if (p := _drug_problem(f"{path.name}:{line}", r))]
    if problems:
        raise ImportProblems(problems)
    return [{"target": r["input"].strip(), "reactants": r["output"].strip(),
             "explanation": r["explanation"].strip()} for _, r in rows]


def drug_key(target: str, reactants: str) -> str:
    """A stable key from the row's content, so re-importing adds nothing."""
    digest = hashlib.sha256(f"{target.strip()}>>{reactants.strip()}".encode()).hexdigest()
    return f"rxn-{digest[:16]}"


def import_study_drug(
    engine: Engine,
    csv_path: Path,
    *,
    few_shot: Path | None = None,
    name: str | None = None,
    split: str | None = None,
    description: str = "",
    progress: ProgressFn | None = None,
) -> ImportResult:
    """Validate the study's retrosynthesis CSV (every SMILES parsed), then store it.

    Instances: payload = target SMILES, reference prediction = reactant SMILES,
    reference explanation = explanation. Few-shot examples go to
    Dataset.config["few_shot"] as [{"target", "reactants", "explanation"}].
    """
    csv_path = Path(csv_path)
    meter = Meter(progress)

    def store(direct: bool) -> ImportResult:
        rows = CsvRows(csv_path, required=DRUG_COLUMNS, label="retrosynthesis CSV", meter=meter)
        problems: list[str] = Problems()
        fixed_split = check_split(split, "--split", problems)
        shots: list[dict[str, str]] | None = None
        if few_shot is not None:
            try:
                shots = read_few_shot(Path(few_shot))
            except ImportProblems as err:
                problems.extend(err.problems)
        config: dict[str, Any] = {}
        if shots is not None:
            config["few_shot"] = shots
        return store_instances(
            engine, name=name or csv_path.stem, task="drug", config=config, problems=problems, meter=meter,
            items=_drug_items(csv_path, rows, problems, fixed_split if split else None, bool(split)),
            description=description or f"single-step retrosynthesis records from {csv_path.name}",
            source=str(csv_path), repeats=(csv_path.name, "reaction"), direct=direct,
        )

    return store_twice(meter, store)


def _drug_items(csv_path: Path, rows: CsvRows, problems: list[str], fixed_split: str | None,
                split_given: bool) -> Iterator[NewInstance]:
    for line, r in rows:
        where = f"{csv_path.name}:{line}"
        bad = _drug_problem(where, r)
        if bad:
            problems.append(bad)
            continue
        target, reactants = r["input"].strip(), r["output"].strip()
        explanation = r["explanation"].strip()
        if not explanation:
            problems.append(f"{where}: empty explanation")
            continue
        row_split = fixed_split if split_given else check_split(r.get("split"), where, problems)
        meta: dict[str, Any] = {"row": line}
        if r.get("name", "").strip():
            try:
                meta["name"] = clean_name(r["name"], f"{where}: name")
            except TextRefused as err:
                problems.append(str(err))
                continue
        yield NewInstance(key=drug_key(target, reactants), split=row_split, payload=target,
                          reference_prediction=reactants, reference_explanation=explanation,
                          meta=meta, line=line, row_hash=csv_row_hash(r))
    if rows.problems:
        problems[:] = rows.problems
