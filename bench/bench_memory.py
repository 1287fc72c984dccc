"""The app server's memory over many Annotate submits (docs/development.md, Memory budgets): `python
bench/bench_memory.py [COUNT]`.

A real `streamlit run` server (started as tests/browser do) on a throwaway SQLite database
holding a RAD dataset whose cases carry megabyte X-ray images (noise, so the PNGs do not
compress: a display image is about as large as a real one); Debian's chromium driven by
Playwright answers COUNT reply forms (default 1,000) with the keyboard, as an expert would:
Alt+5 (prediction matches: Yes, which fills the machine's prediction), Alt+8 (explanation
agrees: No), Ctrl+Enter (Send); the simulated machine answers each. Not in-process, not
AppTest: the figures are the server process's resident set size (VmRSS from /proc) after a
warm-up (the first WARMUP submits, default max(50, COUNT // 5): by then every byte-bounded
cache of pxp.app is full) and at the end, plus every 100 submits (--every). Goal: growth ≤ 20 MB.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import checkout  # noqa: F401  (this checkout on the import path)
import numpy as np
from PIL import Image
from sqlmodel import Session as DB
from sqlmodel import func, select

from pxp.running.pxp.live.assignment import create_live_experiment
from pxp.storage.store import get_engine
from pxp.storage.tables import Asset, Dataset, Instance, Message
from tests.browser.test_browser_app import CHROMIUM, _start_streamlit, _stop, launch
from tests.factories import FINDINGS, LABELS

IMAGES = 8  # distinct images; the cases share them but each case is its own cache entry
SIDE = 1600  # pixels: a 1600×1600 8-bit noise PNG is ~2.5 MB, as a real chest X-ray display


def rss_mb(pid: int) -> float:
    """The resident set size of process `pid` in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def make_xray_dataset(url: str, cases: int) -> None:
    """A RAD dataset of `cases` cases over IMAGES distinct megabyte noise images."""
    engine = get_engine(url)
    rng = np.random.default_rng(13)
    with DB(engine) as db:
        ds = Dataset(name="bench-xray", task="rad", synthetic=True, config={"labels": list(LABELS)})
        db.add(ds)
        db.flush()
        shas = []
        for _ in range(IMAGES):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (SIDE, SIDE), dtype=np.uint8)).save(buf, format="PNG")
            data = buf.getvalue()
            sha = hashlib.sha256(data).hexdigest()
            db.add(Asset(sha256=sha, mime="image/png", width=SIDE, height=SIDE, size=len(data), data=data))
            shas.append(sha)
        for o in range(1, cases + 1):
            lab = LABELS[o % len(LABELS)]
            db.add(Instance(dataset_id=ds.id or 0, key=f"xray_{o}", ordinal=o, split="test", label=lab,
                            reference_prediction=lab, reference_explanation=f"Case {o}: {FINDINGS[lab]}.",
                            asset_sha256=shas[o % IMAGES]))
        db.commit()
    create_live_experiment(engine, dataset="bench-xray", name="bench-memory", n=10, k=3)


def human_messages(url: str) -> int:
    with DB(get_engine(url)) as db:
        return int(db.exec(select(func.count()).select_from(Message).where(Message.sender == "human")).one())


FORM = "[class*='st-key-annotate_form_']"


def form_key(page: Any) -> str:
    """The key of the reply form on screen (annotate_form_<session>_<j>), once one is shown."""
    page.wait_for_selector(FORM, timeout=60000)
    cls = str(page.eval_on_selector(FORM, "e => e.className"))
    return next(c for c in cls.split() if c.startswith("st-key-annotate_form_"))[len("st-key-"):]


IDLE = ("() => !document.querySelector('[data-testid=\"stStatusWidget\"] button')"
        " && !document.querySelector('[data-testid=\"stSpinner\"]')")


def press_until(page: Any, key: str, selector: str, tries: int = 6) -> None:
    """Press `key` once the script run is idle, again if `selector` does not show (a key
    pressed while the page re-renders can be lost)."""
    for _ in range(tries):
        page.wait_for_function(IDLE, timeout=60000)
        page.keyboard.press(key)
        try:
            page.wait_for_selector(selector, timeout=5000)
            return
        except Exception:
            continue
    raise RuntimeError(f"{key} did not bring up {selector}")


def submit_once(page: Any) -> None:
    """One reply by keyboard: Alt+5 (Yes), Alt+8 (No), Ctrl+Enter; returns when the next form is up."""
    form = form_key(page)
    key = "annotate_" + form[len("annotate_form_"):]
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    press_until(page, "Alt+5", f".st-key-{key}_match_yes [data-testid='stBaseButton-primary']")
    press_until(page, "Alt+8", f".st-key-{key}_agree_no [data-testid='stBaseButton-primary']")
    tagged = page.get_by_text("Your message will be tagged")
    no_prediction = page.get_by_text("give your prediction first")
    tagged.or_(no_prediction).first.wait_for(timeout=60000)
    if not tagged.is_visible():  # rare: Yes did not fill the prediction; pick the first option
        page.get_by_label("My prediction").click()
        page.get_by_role("option").first.click()
        tagged.wait_for(timeout=60000)
    new_form = ("(old) => { const f = document.querySelector(\"[class*='st-key-annotate_form_']\");"
                " return f && !f.className.split(' ').includes('st-key-' + old)"
                " && !document.querySelector('[data-testid=\"stSpinner\"]'); }")
    for _ in range(6):  # Send again if the key was lost: a message is stored once per (session, j)
        page.wait_for_function(IDLE, timeout=60000)
        page.keyboard.press("Control+Enter")
        try:
            page.wait_for_function(new_form, arg=form, timeout=20000)
            return
        except Exception:
            continue
    raise RuntimeError(f"Ctrl+Enter did not send {form}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("count", nargs="?", type=int, default=1000, help="Annotate submits (default 1000)")
    parser.add_argument("--warmup", type=int, default=None, help="submits before the first RSS figure")
    parser.add_argument("--every", type=int, default=100, help="print the RSS every N submits")
    args = parser.parse_args(argv)
    count = args.count
    warmup = args.warmup if args.warmup is not None else max(50, count // 5)
    if warmup >= count:
        parser.error(f"the warm-up ({warmup}) must be smaller than the count ({count})")
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is required")
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="pxp-bench-memory-"))
    url = f"sqlite:///{tmp / 'memory.db'}"
    make_xray_dataset(url, cases=count // 2 + 20)
    env = {**os.environ, "PXP_DATABASE_URL": url, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc, base, log = _start_streamlit(env, tmp)
    print(f"server pid {proc.pid}, {base}; RSS at start {rss_mb(proc.pid):.1f} MB")
    t0 = time.perf_counter()
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{base}/annotate")
                name = page.get_by_label("Your name")
                name.wait_for(timeout=60000)
                name.fill("Dr Memory")
                name.press("Enter")
                before = human_messages(url)
                after_warmup = 0.0
                for i in range(1, count + 1):
                    try:
                        submit_once(page)
                    except Exception:
                        page.screenshot(path=str(tmp / "failed.png"), full_page=True)
                        print(f"submit {i} failed; screenshot {tmp / 'failed.png'}")
                        raise
                    if i == warmup:
                        after_warmup = rss_mb(proc.pid)
                        print(f"after warm-up ({warmup} submits): RSS {after_warmup:.1f} MB")
                    if i % args.every == 0 or i == count:
                        el = time.perf_counter() - t0
                        print(f"{i:5d} submits: RSS {rss_mb(proc.pid):.1f} MB  ({el / i:.2f} s per submit)",
                              flush=True)
                stored = human_messages(url) - before
            finally:
                browser.close()
        end = rss_mb(proc.pid)
    finally:
        _stop(proc)
        log.close()
    print(f"stored human messages: {stored} (of {count} submits)")
    print(f"RSS after warm-up {after_warmup:.1f} MB, at the end {end:.1f} MB: "
          f"growth {end - after_warmup:+.1f} MB over {count - warmup} submits (goal ≤ 20 MB)")


if __name__ == "__main__":
    main()
