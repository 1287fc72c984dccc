"""Benchmark: first-start demo load, study import, rendering (goal: demo < 3 s).

    python bench/bench_data.py [--repeat 3]

Each figure is the median of --repeat runs on a fresh SQLite file. The study import reads the published
sample (PXP_STUDY_SAMPLE, tests/study_sample.py) when present, else study files generated in its format.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)
from sqlalchemy import Engine

from pxp.data.demo.make_demo import DATA_DIR, DRUGS
from pxp.data.importers.study import import_study_drug, import_study_rad
from pxp.data.render import molecule_svg, reaction_parts, xray_display_png
from pxp.running.pxp.controlled.demo import ensure_demo
from pxp.storage.store import make_engine, upgrade
from tests.study_sample import PUBLISHED, Study, generate


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fresh() -> Engine:
    tmp = tempfile.mkdtemp(prefix="pxp-bench-")
    engine = make_engine(f"sqlite:///{tmp}/b.db")
    upgrade(engine)
    return engine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    r = args.repeat
    print(f"ensure_demo on an empty database: {timed(lambda: ensure_demo(fresh()), r):.2f} s")
    published = (PUBLISHED / "data").is_dir()
    study = Study(PUBLISHED) if published else generate(Path(tempfile.mkdtemp(prefix="pxp-bench-")) / "pxp-study")
    which = "published sample" if published else "generated files"
    t = timed(lambda: import_study_rad(fresh(), study.rad_csv), r)
    print(f"import study RAD (20 rows, 19 images, {which}): {t:.2f} s")
    t = timed(lambda: import_study_drug(fresh(), study.drug_csv), r)
    print(f"import study DRUG (60 rows, {which}): {t:.2f} s")
    t = timed(lambda: [molecule_svg(d[1]) for d in DRUGS], r)
    print(f"molecule_svg: {t / len(DRUGS) * 1000:.1f} ms per molecule")
    t = timed(lambda: [reaction_parts(d[2], d[1]) for d in DRUGS], r)
    print(f"reaction_parts: {t / len(DRUGS) * 1000:.1f} ms per reaction")
    png = (DATA_DIR / "demo-rad" / "images" / "phantom_01.png").read_bytes()
    t = timed(lambda: xray_display_png(png, {}, window=120, level=128), r)
    print(f"xray_display_png with window/level (256 px): {t * 1000:.1f} ms")


if __name__ == "__main__":
    main()
