"""The RAD demo set (DESIGN §6): synthetic chest-radiograph phantoms, six cases per finding.

The phantoms are drawn by pxp.data.demo.phantoms (deterministic from SEED); the rows follow the
published study's X-ray CSV format plus a `split` column. Written to
pxp/data/demo_data/demo-rad/ by `python -m pxp.data.demo.make_demo`.
"""

from __future__ import annotations

from pxp.data.demo.phantoms import FINDINGS, SHORT, draw_phantom, report

SEED = 20240
CASES_PER_FINDING = 6
SPLIT_OF_CASE = ("train", "train", "train", "val", "test", "test")
RAD_HEADER = ["case", "label", "label_short", "img_path", "report", "link", "split"]


def rad_cases() -> tuple[dict[str, bytes], list[list[str]]]:
    """The phantom PNGs (by path relative to demo-rad/) and the CSV rows of their cases."""
    images: dict[str, bytes] = {}
    rows: list[list[str]] = []
    cases = [(f, i) for i in range(CASES_PER_FINDING) for f in FINDINGS]
    for n, (finding, i) in enumerate(cases, start=1):
        ph = draw_phantom(finding, SEED * 1000 + n)
        img = f"images/phantom_{n:02d}.png"
        images[img] = ph.png
        rows.append([f"phantom_{n:02d}", finding, SHORT[finding], img,
                     report(finding, ph.facts), "", SPLIT_OF_CASE[i]])
    return images, rows
