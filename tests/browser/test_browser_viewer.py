"""The radiograph viewer draws what the payload holds (pxp/data/pixels.py, pxp/app/viewer.py): an 8-bit
image sent a byte per pixel and a 16-bit one sent at full depth give, on the canvas, the grey levels the
window maps their values to; window/level by the keyboard (I: invert) changes them in the browser.

A one-page Streamlit script shows the two viewers (the real component, fed the real payloads); the
canvas pixels are read back in chromium. On the Annotate page, a case whose machine has not answered yet
(nothing prepared) shows its film while the machine answers.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from pxp.data.pixels import pixel_values, read_header, xray_pixels
from tests.browser.test_browser_app import CHROMIUM, _start_streamlit, _stop, held_machine, launch, server  # noqa: F401

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
#: the two images: 8-bit grey levels 40..239 along x; 16-bit stored values rising along x, read as
#: 1000..60000 (a DICOM import's full-range asset), windowed at 20000 ± 10000
W, H = 200, 60
GREY8 = (40 + np.arange(W)).astype(np.uint8)
DEEP16 = np.linspace(1000, 60000, W).round().astype(np.uint16)
META16 = {"window": {"center": 20000.0, "width": 20000.0, "raw_min": 1000.0, "raw_max": 60000.0}}
SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from pxp.app.viewer import radiograph_viewer
radiograph_viewer(Path({p8!r}).read_bytes(), key="v8")
radiograph_viewer(Path({p16!r}).read_bytes(), key="v16")
"""
#: the viewers on the page, in page order (the components live in shadow roots)
VIEWERS = """const all = (root) => [...root.querySelectorAll('*')].flatMap((e) => e.shadowRoot
    ? [...e.shadowRoot.querySelectorAll('[data-pxp-viewer]'), ...all(e.shadowRoot)] : []);
  const viewers = [...document.querySelectorAll('[data-pxp-viewer]'), ...all(document)];"""
#: the grey level of canvas `i` at column x, row 1, once that canvas is drawn
PIXEL = "([i, x]) => { " + VIEWERS + """
  const v = viewers[i];
  if (!v || !v.dataset.drawn) return null;
  return [v.querySelector('canvas').getContext('2d').getImageData(x, 1, 1, 1).data[0]];
}"""
#: what the first viewer draws over its film, drawn and (its mark taken away for a moment) not yet drawn
PLACEHOLDER = "() => { " + VIEWERS + """
  const v = viewers[0], over = () => getComputedStyle(v, "::before").content, drawn = v.dataset.drawn;
  const now = over(); delete v.dataset.drawn; const before = over(); v.dataset.drawn = drawn;
  return [now, before];
}"""
#: some viewer on the page has drawn its image
DRAWN = "() => { " + VIEWERS + " return viewers.some((v) => v.dataset.drawn); }"


def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.tile(arr, (H, 1))).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def viewer_page(tmp_path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """The page's address, and the 16-bit image's values in its units (row 1), as the payload gives them."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    p8, p16 = tmp_path / "p8.bin", tmp_path / "p16.bin"
    p8.write_bytes(xray_pixels(_png(GREY8)))
    p16.write_bytes(xray_pixels(_png(DEEP16), META16))
    assert read_header(p8.read_bytes())["bits"] == 8 and read_header(p16.read_bytes())["bits"] == 16
    script = tmp_path / "viewers.py"
    script.write_text(SCRIPT.format(root=str(ROOT), p8=str(p8), p16=str(p16)))
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc, base, log = _start_streamlit(env, tmp_path, script=script)
    try:
        yield base, pixel_values(p16.read_bytes())[1]
    finally:
        _stop(proc)
        log.close()


def _grey(page: Any, i: int, x: int) -> int:
    return int(page.wait_for_function(PIXEL, arg=[i, x], timeout=60_000).json_value()[0])


def test_both_depths_are_drawn_through_the_window(viewer_page: tuple[str, np.ndarray]) -> None:
    from playwright.sync_api import sync_playwright

    assert sys.byteorder == "little"  # the payload's uint16 are little-endian, as the browser reads them
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1400})
            base, values16 = viewer_page
            page.goto(base)
            for x in (0, 50, 137, W - 1):  # 8 bits, the default window 0..255: the grey level itself
                assert abs(_grey(page, 0, x) - int(GREY8[x])) <= 1, x
            lo = 20000.0 - 10000.0
            want = np.clip((values16 - lo) / 20000.0, 0, 1) * 255  # 16 bits through the stored window
            assert want[0] == 0 and want[-1] == 255 and 0 < want[60] < 255
            for x in (0, 30, 60, 80, W - 1):
                assert abs(_grey(page, 1, x) - want[x]) <= 1.5, (x, want[x])
            wl = page.locator(".pxp-wl").nth(1)
            wl.focus()
            page.keyboard.press("i")  # inverted, in the browser
            page.wait_for_function(PIXEL.replace("data[0]];", "data[0]].filter((g) => g === 255)[0];"),
                                   arg=[1, 0], timeout=60_000)
            assert abs(_grey(page, 1, 60) - (255 - want[60])) <= 1.5
            # until its image is drawn a film's place says so (never a black box); once drawn, nothing over it
            assert page.evaluate(PLACEHOLDER) == ["none", '"Loading the film…"']
        finally:
            browser.close()


@pytest.fixture
def slow_machine(tmp_path: Path) -> Iterator[tuple[str, threading.Event]]:
    """A real app server on a live RAD experiment with films whose LLM machine (the local wire-format server)
    answers only once the test lets it, and no next case prepared: the page's own run asks for the INIT."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    with held_machine(tmp_path, per_label=1, size=(1200, 1000), holds=lambda _req: True) as held:
        yield held


def test_the_case_is_drawn_while_the_machine_answers(slow_machine: tuple[str, threading.Event]) -> None:
    """With the machine's opening message still to come (nothing prepared), the film is on screen before it:
    the expert reads the case while the machine answers; the reply form follows the answer."""
    from playwright.sync_api import sync_playwright

    base, go = slow_machine
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"{base}/annotate?annotator=Dr+Slow&role=Radiologist&dataset=films")
            page.wait_for_function(DRAWN, timeout=90_000)  # the film, while the machine has not answered
            assert page.locator('[class*="st-key-annotate_form_"]').count() == 0
            go.set()
            page.wait_for_selector('[class*="st-key-annotate_form_"]', timeout=90_000)
        finally:
            browser.close()


FILM_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from pxp.app.viewer import radiograph_viewer
radiograph_viewer(Path({p!r}).read_bytes(), key="film")
"""
#: click the viewer's preset button named `name` (in the component's shadow root)
PRESET = "(name) => { " + VIEWERS.replace("'[data-pxp-viewer]'", "'.pxp-bar button'").replace(
    "viewers", "buttons") + """
  const b = buttons.find((e) => e.textContent === name); if (!b) return false; b.click(); return true; }"""
#: the viewer's window (data-wl) and the grey level of canvas pixel (x, y), once drawn
AT = "([x, y]) => { " + VIEWERS + """
  const v = viewers[0]; if (!v || !v.dataset.drawn) return null;
  return [v.dataset.wl, v.querySelector('canvas').getContext('2d').getImageData(x, y, 1, 1).data[0]]; }"""


@pytest.fixture
def film_page(tmp_path: Path, engine: Any) -> Iterator[tuple[str, np.ndarray]]:
    """A page with a demo film as `pxp demo --films` imports it (12-bit DICOM, 2048 px), and its values."""
    from sqlmodel import Session as DB
    from sqlmodel import select

    from pxp.data.importers.dicom import import_dicom
    from pxp.data.pixels import instance_pixels
    from pxp.storage.tables import Instance
    from tests.data.test_demo_films import make_film

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    make_film(tmp_path)
    import_dicom(engine, tmp_path / "labels.csv", name="films")
    with DB(engine) as db:
        inst = db.exec(select(Instance)).one()
    payload = instance_pixels(engine, inst.id or 0)
    assert payload is not None
    (tmp_path / "film.bin").write_bytes(payload)
    script = tmp_path / "film.py"
    script.write_text(FILM_SCRIPT.format(root=str(ROOT), p=str(tmp_path / "film.bin")))
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc, base, log = _start_streamlit(env, tmp_path, script=script)
    try:
        yield base, pixel_values(payload)
    finally:
        _stop(proc)
        log.close()


def test_every_preset_and_a_right_drag_on_a_16_bit_demo_film(film_page: tuple[str, np.ndarray]) -> None:
    """The Lung, Soft tissue and Bone presets of a 12-bit demo film window its stored values in the browser (a lung
    pixel through each window gives the grey level the window maps it to); a right-drag moves the window in those
    units."""
    from playwright.sync_api import sync_playwright

    base, values = film_page
    x, y = 640, 960  # in the right lung field
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(base)
            page.wait_for_function(AT, arg=[x, y], timeout=60_000)
            for name, center, width in (("Lung", 1500, 1400), ("Soft tissue", 3000, 1000), ("Bone", 3450, 700)):
                assert page.evaluate(PRESET, name), f"no {name} preset"
                wl = f"{center}|{width}|0"
                shown = page.wait_for_function(AT.replace("return [v.dataset.wl", "if (v.dataset.wl !== "
                                                          + repr(wl) + ") return null; return [v.dataset.wl"),
                                               arg=[x, y], timeout=60_000).json_value()
                want = np.clip((values[y, x] - (center - width / 2)) / width, 0, 1) * 255
                assert abs(shown[1] - want) <= 1.5, (name, shown, want)
            box = page.locator("[data-pxp-viewer]").bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + 150, box["y"] + 150)
            page.mouse.down(button="right")
            for step in range(1, 6):
                page.mouse.move(box["x"] + 150 + 12 * step, box["y"] + 150 - 6 * step)
            page.mouse.up(button="right")
            page.wait_for_function(AT.replace("return [v.dataset.wl", "if (v.dataset.wl.startsWith('3450|')) "
                                              "return null; return [v.dataset.wl"), arg=[x, y], timeout=60_000)
            center, width, _ = (float(p) for p in page.evaluate(AT, [x, y])[0].split("|"))
            assert (center, width) != (3450, 700) and 0 < center < 4096 and 0 < width < 4096, (center, width)
        finally:
            browser.close()


#: the film's drawn size inside its box ([width, height] of what is visible), the box, the window and the zoom
FILM = "() => { " + VIEWERS + """
  const v = viewers[0]; if (!v || !v.dataset.drawn) return null;
  const r = v.querySelector('canvas').getBoundingClientRect(), b = v.getBoundingClientRect();
  const seen = (a0, a1, lo, hi) => Math.round(Math.max(0, Math.min(a1, hi) - Math.max(a0, lo)));
  return { film: [seen(r.left, r.right, b.left, b.right), seen(r.top, r.bottom, b.top, b.bottom)],
           box: [Math.round(b.width), Math.round(b.height)], wl: v.dataset.wl, zoom: window.pxpViewer().scale }; }"""


def test_the_film_fills_the_screen_and_refits(server: tuple[str, str]) -> None:  # noqa: F811
    """At 1280×720 the first case's film is drawn at least 460 px a side with the reply form's Send in view; it
    refits when the sidebar folds and when the window is resized, keeping its zoom and window; F shows it over the
    whole viewport and Esc returns, Alt+V too from a text field (docs/annotating.md, Pages)."""
    from playwright.sync_api import sync_playwright

    from tests.browser.test_browser_app import _annotate_as, _session

    base, url = server
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            _annotate_as(page, base, "Dr Film", "demo-rad (rad)")
            sid, _, _ = _session(url, "Dr Film", page)
            send = f".st-key-annotate_{sid}_2_send"
            page.wait_for_function(f"""() => {{ const r = document.querySelector('{send}').getBoundingClientRect();
                                      return r.height > 0 && r.bottom <= innerHeight; }}""", timeout=60_000)
            first = page.wait_for_function(FILM, timeout=60_000).json_value()
            assert min(first["film"]) >= 460, first
            box = page.locator("[data-pxp-viewer]").bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, -400)  # zoom in, then a window of its own
            page.mouse.down(button="right")
            page.mouse.move(box["x"] + box["width"] / 2 + 40, box["y"] + box["height"] / 2 - 20)
            page.mouse.up(button="right")
            page.wait_for_function(FILM.replace("return {", "if (window.pxpViewer().scale < 1.5 || v.dataset.wl === "
                                                + repr(first["wl"]) + ") return null; return {"), timeout=60_000)
            zoomed = page.evaluate(FILM)
            # full screen by F, back by Esc (the focus on the film, not in a text field)
            page.mouse.click(box["x"] + 20, box["y"] + 20)
            page.keyboard.press("f")
            full = page.wait_for_function(FILM.replace("return {", "if (b.width < 1200) return null; return {"),
                                          timeout=10_000).json_value()
            assert full["box"][0] >= 1200 and full["box"][1] >= 600 and full["wl"] == zoomed["wl"], full
            page.keyboard.press("Escape")
            back = page.wait_for_function(FILM.replace("return {", "if (b.width > 1000) return null; return {"),
                                          timeout=10_000).json_value()
            assert back["box"] == zoomed["box"] and back["wl"] == zoomed["wl"], (back, zoomed)
            assert abs(back["zoom"] - zoomed["zoom"]) < 1e-6
            # typing in the reply form: F is a letter there, Alt+V shows the film all the same, and takes it back
            field = page.locator(f'.st-key-annotate_form_{sid}_2 [aria-label^="My prediction"]').first
            field.focus()
            assert page.evaluate("() => (document.activeElement.getAttribute('aria-label') || '')"
                                 ".startsWith('My prediction')")
            page.keyboard.press("Alt+v")
            page.wait_for_function(FILM.replace("return {", "if (b.width < 1200) return null; return {"),
                                   timeout=10_000)
            page.keyboard.press("Alt+v")
            page.wait_for_function(FILM.replace("return {", "if (b.width > 1000) return null; return {"),
                                   timeout=10_000)
            assert page.evaluate("() => (document.activeElement.getAttribute('aria-label') || '')"
                                 ".startsWith('My prediction')")  # still typing where it was
            # the sidebar folded: a wider box, the film refitted at once, its zoom and window kept
            page.mouse.move(100, 300)
            page.locator('[data-testid="stSidebarCollapseButton"] button').click(force=True)
            wide = page.wait_for_function(FILM.replace("return {", "if (b.width < " + str(back["box"][0] + 100)
                                                       + " || b.height < b.width * 0.9) return null; return {"),
                                          timeout=10_000).json_value()  # (the sidebar folds in an animation)
            assert wide["wl"] == zoomed["wl"] and abs(wide["zoom"] - zoomed["zoom"]) < 1e-6, wide
            assert min(wide["box"]) > min(back["box"]), (wide, back)  # the film's box, larger both ways
            # a smaller window: a smaller box, refitted, the zoom and window kept
            page.set_viewport_size({"width": 1024, "height": 700})
            small = page.wait_for_function(FILM.replace("return {", "if (b.width >= " + str(wide["box"][0])
                                                        + ") return null; return {"), timeout=10_000).json_value()
            assert small["wl"] == zoomed["wl"] and abs(small["zoom"] - zoomed["zoom"]) < 1e-6, small
            # Alt+V from the explanation, Esc back: the keyboard is where it was, and what is typed lands there
            expl = page.locator(f'.st-key-annotate_form_{sid}_2 textarea[aria-label="My explanation"]').first
            expl.fill("Apical")
            expl.focus()
            page.keyboard.press("Alt+v")
            page.wait_for_function(FILM.replace("return {", "if (b.width < 900) return null; return {"),
                                   timeout=10_000)
            page.keyboard.press("Escape")
            page.wait_for_function(FILM.replace("return {", "if (b.width > 800) return null; return {"),
                                   timeout=10_000)
            assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "My explanation"
            page.keyboard.type(" line")
            assert expl.input_value() == "Apical line"
        finally:
            browser.close()


#: from when it is run: the ms (since then) at which a film's preview and the film itself were first drawn (their
#: component elements are marked), and whether the preview is hidden and the film shown after
FILM_TIMES = """() => { const t0 = performance.now(); window.__pxpFilmAt = {};
  const tick = () => { const at = window.__pxpFilmAt, p = document.querySelector('[data-pxp-preview]'),
    f = document.querySelector('[data-pxp-drawn]');
    if (p && at.preview === undefined) at.preview = performance.now() - t0;
    if (f && at.film === undefined) at.film = performance.now() - t0;
    if (f && p) { at.previewShown = p.closest('[data-testid="stElementContainer"]').checkVisibility();
                  at.filmShown = f.closest('[data-testid="stElementContainer"]').checkVisibility(); }
  };
  setInterval(tick, 10); }"""


def test_a_film_is_previewed_at_once_then_drawn_whole(tmp_path: Path) -> None:
    """On a slow link (2 Mbit/s), a new case's film is there at once as a low-resolution copy (about 50 kB) and
    then drawn whole in its place (1.2 MB): the preview is drawn seconds before the film, and hidden once the
    film is drawn."""
    from playwright.sync_api import sync_playwright

    from pxp.running.pxp.live.assignment import create_live_experiment
    from pxp.storage.store import get_engine
    from tests.browser.test_browser_app import serving
    from tests.factories import make_rad_images

    url = f"sqlite:///{tmp_path / 'preview.db'}"
    engine = get_engine(url)
    make_rad_images(engine, name="films", per_label=1, size=(1200, 1000))
    create_live_experiment(engine, dataset="films", name="films")
    with serving(url, tmp_path) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"{base}/annotate?annotator=Dr+Far&role=Radiologist&dataset=films")
            page.wait_for_selector("[data-pxp-drawn]", state="attached", timeout=90_000)  # the app's files cached
            cdp = page.context.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 20,
                                                         "downloadThroughput": 250_000, "uploadThroughput": 250_000})
            page.add_init_script("(" + FILM_TIMES + ")()")
            page.reload()  # a new browser session: the case's film comes again, over the slow link
            page.wait_for_function("() => window.__pxpFilmAt && window.__pxpFilmAt.filmShown !== undefined",
                                   timeout=90_000)
            at = page.evaluate("() => window.__pxpFilmAt")
            assert at["preview"] + 1000 < at["film"], at  # the preview, then (1.2 MB later) the film
            assert at["filmShown"] and not at["previewShown"], at
            print(f"2 Mbit/s: the preview drawn {at['preview'] / 1000:.2f} s after the page was asked, "
                  f"the film {at['film'] / 1000:.2f} s")
        finally:
            browser.close()
