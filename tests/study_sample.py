"""The study files in their published format: the published sample when present, and files generated here.

The reference implementation of the PXP study (karannb/interact, MIT licence) published its data as an
archive: `data/train_xray_data.csv` (`case,label,label_short,img_path,report,link`, `img_path` relative to
the folder holding `data/`), `data/xrays/` (names with spaces, mixed .png/.jpg/.jpeg), `data/retro.csv`
(`output,input,explanation`: reactants, target, text) and `data/few_shot_DRUG.csv` (the same and `matchOK`).

`PXP_STUDY_SAMPLE` names the folder of a sample of that archive (the one holding `data/`); by default
`shared/data/pxp-study` beside the repository's folder, where CI keeps it (docs/development.md, Tests).
Tests marked `published` read it: without it they skip with one reason line, or fail when `CI=true`.
`generate` writes files of the same shape (20 X-ray rows over 19 images, `case_20` on two rows with two
labels, 60 reactions, 5 few-shot rows), so a clone with nothing beside it still tests what those cover.
"""

from __future__ import annotations

import csv
import os
import random
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from rdkit import Chem

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = Path(os.environ.get("PXP_STUDY_SAMPLE") or REPO.parent / "shared" / "data" / "pxp-study")
RAD_COLUMNS = ["case", "label", "label_short", "img_path", "report", "link"]
SHORT = {"Atelectasis": "ATCS", "Pneumonia": "PNUM", "Pleural Effusion": "PLEF", "Pneumothorax": "PNTX",
         "Cardiomegaly": "CRDM"}
# (case, label, image file) in the published file's order: one image serves case_20's two rows
CASES = [
    ("case_1", "Atelectasis", "Case 1 Image - Lateral.png"), ("case_2", "Atelectasis", "Case 2 Image - Lateral.jpeg"),
    ("case_4", "Atelectasis", "Case 4 Image - Frontal.jpeg"), ("case_11", "Atelectasis", "Case 11 Image.jpeg"),
    ("case_20", "Atelectasis", "Case 20 Image.png"), ("case_145", "Pneumonia", "Case 145 Image.jpeg"),
    ("case_121", "Pleural Effusion", "Case 121 Image - Lateral.jpeg"),
    ("case_124", "Pleural Effusion", "Case 124 Image.jpeg"), ("case_165", "Pneumothorax", "Case 165 Image.png"),
    ("case_162", "Pneumothorax", "Case 162 Image.jpg"), ("case_175", "Pneumothorax", "Case 175 Image.jpeg"),
    ("case_20", "Pneumothorax", "Case 20 Image.png"), ("case_163", "Pneumothorax", "Case 163 Image.jpeg"),
    ("case_179", "Pneumothorax", "Case 179 Image.jpg"),
    ("case_42", "Cardiomegaly", "Case 42 Image - Cardiothoracic Ratio Fig 1.jpg"),
    ("case_59", "Cardiomegaly", "Case 59 Image.jpg"), ("case_57", "Cardiomegaly", "Case 57 Image.jpeg"),
    ("case_54", "Cardiomegaly", "Case 54 Image.jpeg"), ("case_48", "Cardiomegaly", "Case 48 Image.jpeg"),
    ("case_45", "Cardiomegaly", "Case 45 Image.jpeg"),
]
# amide couplings: an acid and an amine give the target (60 reactions: 6 acids x 10 amines)
ACIDS = ["CC(=O)O", "O=C(O)c1ccccc1", "O=C(O)c1ccc(F)cc1", "O=C(O)c1cccnc1", "O=C(O)C1CCCC1", "COc1ccc(C(=O)O)cc1"]
AMINES = ["NCc1ccccc1", "Nc1ccccc1", "C1CCNCC1", "C1COCCN1", "NCC(F)(F)F", "CN", "Nc1cnccn1", "NC1CC1",
          "Nc1ccc(Br)cc1", "NCCO"]


@dataclass(frozen=True)
class Study:
    """A folder in the published layout."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def rad_csv(self) -> Path:
        return self.data / "train_xray_data.csv"

    @property
    def drug_csv(self) -> Path:
        return self.data / "retro.csv"

    @property
    def few_shot(self) -> Path:
        return self.data / "few_shot_DRUG.csv"

    @property
    def xrays(self) -> Path:
        return self.data / "xrays"

    def rows(self, path: Path) -> list[dict[str, str]]:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))


def _image(path: Path, rng: random.Random) -> None:
    """A grey film of noise: its own bytes, so every file is a distinct asset; over 600 bytes encoded."""
    size = (548, 630) if path.name == "Case 1 Image - Lateral.png" else (rng.randint(96, 160), rng.randint(96, 160))
    im = Image.frombytes("L", size, rng.randbytes(size[0] * size[1]))
    im.save(path, format="PNG" if path.suffix == ".png" else "JPEG", quality=85)


def _reaction(acid: str, amine: str) -> tuple[str, str]:
    """(reactants, target) as canonical SMILES: the acid's OH replaced by the amine's first nitrogen."""
    rxn = Chem.MolFromSmiles(acid), Chem.MolFromSmiles(amine)
    patt = Chem.MolFromSmarts("C(=O)[OX2H1]")
    acid_c = rxn[0].GetSubstructMatch(patt)
    nitrogen = next(a.GetIdx() for a in rxn[1].GetAtoms() if a.GetSymbol() == "N" and a.GetTotalNumHs() > 0)
    both = Chem.RWMol(Chem.CombineMols(*rxn))
    both.AddBond(acid_c[0], rxn[0].GetNumAtoms() + nitrogen, Chem.BondType.SINGLE)
    both.RemoveAtom(acid_c[2])
    product = both.GetMol()
    Chem.SanitizeMol(product)
    target = Chem.MolToSmiles(product)
    return ".".join(Chem.MolToSmiles(m) for m in rxn), target


def generate(root: Path, seed: int = 51) -> Study:
    """Write a study folder in the published layout under `root` and return it."""
    rng = random.Random(seed)
    study = Study(root)
    study.xrays.mkdir(parents=True)
    rad = []
    for i, (case, label, image) in enumerate(CASES, start=1):
        if not (study.xrays / image).exists():
            _image(study.xrays / image, rng)
        rad.append({"case": case, "label": label, "label_short": SHORT[label], "img_path": f"data/xrays/{image}",
                    "report": f"Report {i}: the film of {case} shows findings of {label.lower()}, "
                              f"reported by a generated study, \"quoted\", with a comma.",
                    "link": f"https://example.org/cases/{i}"})
    with study.rad_csv.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, RAD_COLUMNS)
        w.writeheader()
        w.writerows(rad)
    reactions = [_reaction(a, b) for a in ACIDS for b in AMINES]
    with study.drug_csv.open("w", newline="", encoding="utf-8") as fh:
        w2 = csv.writer(fh)
        w2.writerow(["output", "input", "explanation"])
        for reactants, target in reactions:
            w2.writerow([reactants, target, f"An amide coupling: the acid and the amine of {reactants} form\n"
                                            f"the amide bond of {target}."])
    with study.few_shot.open("w", newline="", encoding="utf-8") as fh:
        w2 = csv.writer(fh)
        w2.writerow(["output", "input", "explanation", "matchOK"])
        for reactants, target in reactions[:5]:
            w2.writerow([reactants, target, "A few-shot example of an amide coupling.", "FALSE"])
    return study
