"""Make the demo data committed in data/ (DESIGN §6): `python -m pxp.data.demo.make_demo`.

- pxp/data/demo_data/demo-rad/: synthetic chest-radiograph phantoms (pxp.data.demo.phantoms) for the
  five findings, in the published study's X-ray CSV format plus a `split` column.
- pxp/data/demo_data/demo-drug/: well-known approved drugs (MW 150-300, at least one aromatic
  ring), each with a textbook one-step disconnection, in the study's retrosynthesis
  CSV format (`output,input,explanation`) plus `name` and `split`; and few-shot
  examples (simple textbook reactions, not drugs of the dataset).

The sets themselves live in pxp.data.demo.demo_rad (phantoms) and pxp.data.demo.demo_drugs (molecules);
this module turns them into files. Everything is deterministic from SEED; tests regenerate it
and compare.
"""

from __future__ import annotations

import argparse
import csv
import io
from importlib import resources
from pathlib import Path

from pxp.data.demo.demo_drugs import DRUG_HEADER, DRUGS, FEW_SHOT, FEW_SHOT_HEADER, drug_rows, few_shot_rows
from pxp.data.demo.demo_rad import RAD_HEADER, SEED, rad_cases

__all__ = ["DATA_DIR", "DRUGS", "FEW_SHOT", "SEED", "demo_files", "main", "write"]

DATA_DIR = Path(str(resources.files("pxp.data") / "demo_data"))  # shipped inside the package


def _csv(header: list[str], rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def demo_files() -> dict[str, bytes]:
    """Every demo file, by path relative to data/, as the generator makes it."""
    images, rows = rad_cases()
    files = {f"demo-rad/{rel}": png for rel, png in images.items()}
    files["demo-rad/cases.csv"] = _csv(RAD_HEADER, rows)
    files["demo-drug/drugs.csv"] = _csv(DRUG_HEADER, drug_rows())
    files["demo-drug/few_shot.csv"] = _csv(FEW_SHOT_HEADER, few_shot_rows())
    return files


def write(out: Path = DATA_DIR) -> list[Path]:
    """Write the demo files under `out` (replacing old ones); returns the paths."""
    written = []
    for rel, data in demo_files().items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write pxp's demo datasets into data/.")
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    paths = write(args.out)
    total = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} files ({total / 1024:.0f} KiB) under {args.out}")


if __name__ == "__main__":
    main()
