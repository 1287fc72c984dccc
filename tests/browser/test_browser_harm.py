"""One user can never harm another, in a real browser (1280×720) against `streamlit run` with login
through a local OpenID Connect provider (docs/operations.md "Login and roles", "Importing data").

One server for the module: huge SMILES typed into the DRUG reply give one line each while
/_stcore/health, polled from a second client, answers every time within a 5 s deadline; Markdown, link, HTML,
directive and very long payloads typed into every text input of every page (as an admin whose
display name is itself a payload) make no image, link, script or frame, no request to another
origin and no dialog; a Send from a stale tab says it was not sent; cookies copied before a logout
give no access after it.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from sqlalchemy import update

from pxp.data.chem import SMILES_MAX_CHARS
from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.storage.audit import audit_events
from pxp.storage.store import get_engine
from pxp.storage.tables import Session
from pxp.team.access import add_member
from tests.browser.test_browser_app import _FORM_KEY, CHROMIUM, _idle, _stop, launch
from tests.browser.test_browser_auth import _log_in, _log_out, start_with_login
from tests.factories import make_drug, make_rad_images

pytestmark = pytest.mark.browser  # one server per module (module fixture): conftest keeps a module on one worker

ANN = ("ann@example.org", "Ann Annotator")
EVIL = "![x](http://2130706433:9/x) [c](http://127.0.0.2:9/c) [click](javascript:alert(1))"
PAYLOADS = [
    EVIL + ' <img src=x onerror="alert(2)"><script>alert(3)</script><iframe src="http://127.0.0.2:9/f"></iframe>'
    " :material/home: :red[red] :rainbow-background[bg] $x^2$ http://127.0.0.2:9/auto",
    "W" * 5000 + EVIL,
]
ADA = ("ada@example.org", "Ada ![a](http://127.0.0.2:9/a) :red[Admin]")
VIEWPORT = {"width": 1280, "height": 720}


@pytest.fixture(scope="module")
def harm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(app URL, database URL): login on, a DRUG live experiment, ann an annotator, ada an admin."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    from oidc_provider_mock import User, run_server_in_thread

    tmp_path = tmp_path_factory.mktemp("harm")
    url = f"sqlite:///{tmp_path / 'harm.db'}"
    engine = get_engine(url)
    make_drug(engine, name="toy-drug")
    add_member(engine, ANN[0], "annotator")
    add_member(engine, ADA[0], "admin")
    create_live_experiment(engine, dataset="toy-drug", name="live-drug")
    make_rad_images(engine, size=(400, 300))  # a case with a radiograph, held by another annotator
    rad = create_live_experiment(engine, dataset="toy-rad-img", name="live-rad")
    rad_sid = claim_next(engine, experiment_id=rad, annotator_id=ensure_annotator(engine, name="rex@example.org"))
    assert rad_sid is not None
    users = [User(sub=email, claims={"email": email, "name": name}) for email, name in (ANN, ADA)]
    with run_server_in_thread(port=0, user_claims=users) as provider_server:
        proc, base, log = start_with_login(tmp_path, f"http://localhost:{provider_server.server_port}", url)
        try:
            yield base, url
        finally:
            _stop(proc)
            log.close()


def _rad_session(url: str) -> int:
    """The radiograph case's session: the one rex@example.org opened (the module's server fixture)."""
    events = audit_events(get_engine(url))
    sids = [e.session_id for e in events if e.actor == "rex@example.org" and e.action == "opened"]
    assert len(sids) == 1 and sids[0] is not None
    return sids[0]


@pytest.fixture(scope="module")
def browser(harm_server: tuple[str, str]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = launch(pw)
        try:
            yield b
        finally:
            b.close()


class Health:
    """A second client polling /_stcore/health while the page works: every answer (its latency, for a
    reader), and any failure. Each request has a 5 s deadline: a server frozen by one user's input
    (RDKit in its interpreter took 45-55 s on 3,000 atoms) misses it; a loaded machine does not."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=5) as r:
                    ok = r.status == 200
                self.latencies.append(time.monotonic() - t0)
                if not ok:
                    self.failures.append("status")
            except OSError as err:
                self.failures.append(f"{time.monotonic() - t0:.2f} s: {err}")
            self._stop.wait(0.2)

    def __enter__(self) -> Health:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@contextlib.contextmanager
def _logged_in(browser: Any, base: str, email: str) -> Iterator[tuple[Any, Any]]:
    """(browser context, page) of a fresh 1280×720 browser logged in as `email`, closed after."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        _log_in(page, base, email)
        yield context, page
    finally:
        context.close()


def _annotate(page: Any, base: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/annotate")
    _idle(page)
    page.get_by_label("Dataset").click()
    page.get_by_role("option", name="toy-drug (drug)").click()
    _idle(page)
    expect(page.get_by_text("The machine now says")).to_be_visible(timeout=60000)
    expect(page.get_by_label("My prediction: reactant SMILES (separate with a dot)").last).to_be_visible()


def test_huge_smiles_are_one_line_and_the_server_stays_up(harm_server: tuple[str, str], browser: Any) -> None:
    from playwright.sync_api import expect

    base, _ = harm_server
    with _logged_in(browser, base, ANN[0]) as (_, page):
        _annotate(page, base)
        # .last: while a slow rerun draws the new form the old one may still be on the page
        field = page.get_by_label("My prediction: reactant SMILES (separate with a dot)").last
        with Health(base) as health:
            for n in (20000, 3000):
                field.fill("C" * n)
                field.press("Tab")
                _idle(page)
                line = page.get_by_text("SMILES too long")
                expect(line).to_have_count(1, timeout=90_000)
                expect(line).to_have_text(f"Cannot send: SMILES too long: {n:,} characters, over the limit of "
                                          f"{SMILES_MAX_CHARS:,} characters for one-step reactants")
            field.fill("CC(=O)Cl.Nc1ccccc1")  # a real step is drawn (in a worker) meanwhile
            field.press("Tab")
            _idle(page)
            expect(page.get_by_text("Canonical form:")).to_be_visible(timeout=90_000)
        assert health.latencies and not health.failures, health.failures  # answered every time, meanwhile


def _inputs(page: Any) -> list[Any]:
    """Every visible text input and text area of the page (not the select boxes' search fields),
    with every expander opened first."""
    closed = page.locator("[data-testid=stExpander] details:not([open]) > summary")
    for _ in range(closed.count()):
        closed.first.click()
        _idle(page)
    loc = page.locator("input[type=text]:not([role=combobox]):visible, input:not([type]):not([role=combobox]):visible,"
                       " textarea:visible")
    return [loc.nth(i) for i in range(loc.count())]


_MADE = """() => {
  const bad = [];
  for (const e of document.querySelectorAll('img, a, script, iframe')) {
    const src = e.getAttribute('src') || e.getAttribute('href') || e.textContent || '';
    if (/2130706433|127\\.0\\.0\\.2|javascript:|alert\\(/.test(src)) bad.push(e.outerHTML.slice(0, 200));
  }
  return bad;
}"""


def test_payloads_in_every_text_input_stay_text(harm_server: tuple[str, str], browser: Any) -> None:
    from playwright.sync_api import expect

    base, _ = harm_server
    requests: list[str] = []
    dialogs: list[str] = []
    where: dict[str, str] = {}  # a request's URL -> the page it was made from
    filled: dict[str, int] = {}
    with _logged_in(browser, base, ADA[0]) as (_, page):  # the provider's own login page is not the app's
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: (requests.append(r.url), where.setdefault(r.url, page.url)))
        nav = page.get_by_test_id("stSidebarNav").locator("a")
        pages = sorted({str(nav.nth(i).get_attribute("href")) for i in range(nav.count())})
        assert len(pages) >= 7, pages
        for href in pages:
            for payload in PAYLOADS:
                page.goto(href if href.startswith("http") else f"{base}/{href.lstrip('/')}")
                _idle(page)
                for box in _inputs(page):
                    box.fill(payload)
                    box.press("Tab")
                    _idle(page)
                    filled[href] = filled.get(href, 0) + 1
                    assert page.evaluate(_MADE) == [], (href, page.evaluate(_MADE))
        expect(page.get_by_text("Logged in as Ada ![a](http")).to_have_count(1)  # the display name shown as text
    assert sum(filled.values()) >= 10, filled
    assert not dialogs, dialogs
    assert requests
    assert not [u for u in requests if "127.0.0.2" in u or "2130706433" in u or "javascript:" in u], requests
    foreign = [(u, where[u]) for u in requests if u.startswith("http") and u.split("/")[2] != base.split("/")[2]]
    assert not foreign, foreign


def test_a_stale_tab_send_says_it_was_not_sent(harm_server: tuple[str, str], browser: Any) -> None:
    from playwright.sync_api import expect

    base, url = harm_server
    engine = get_engine(url)
    with _logged_in(browser, base, ANN[0]) as (_, page):
        _annotate(page, base)
        for button in ("Yes Shortcut Alt + 5", "Yes Shortcut Alt + 7"):
            page.get_by_role("button", name=button).click()
            _idle(page)
        typed = page.get_by_label("My prediction: reactant SMILES (separate with a dot)").last.input_value()
        assert typed
        sid = int(str(page.evaluate(_FORM_KEY)).split("_")[-2])  # the case on screen (the next is prepared)
        bob = ensure_annotator(engine, name="bob@example.org")
        with engine.begin() as c:  # a colleague took the case over meanwhile
            c.execute(update(Session).where(Session.id == sid).values(annotator_id=bob))  # type: ignore[arg-type]
        page.get_by_role("button", name="Send Shortcut Ctrl + Enter").click()
        _idle(page)
        line = page.get_by_text("was not sent")
        expect(line).to_have_count(1, timeout=90_000)
        expect(line).to_contain_text("taken over by another annotator")
        expect(page.get_by_test_id("stCode").filter(has_text=typed).first).to_be_visible()
        refused = [e for e in audit_events(engine) if e.action == "refused"]
        assert [(e.actor, e.session_id) for e in refused] == [(ANN[0], sid)]


def test_the_radiograph_reaches_only_the_logged_in_page(harm_server: tuple[str, str], browser: Any) -> None:
    """The case image comes as the viewer's data in the page's session: no media URL the logged-in
    page used (the page icon is one) gives the case image to a browser without the login cookie."""
    import re

    from playwright.sync_api import expect

    base, url = harm_server
    sid = _rad_session(url)
    media: list[str] = []
    with _logged_in(browser, base, ADA[0]) as (_, page):
        page.on("request", lambda r: media.append(r.url) if "/media/" in r.url else None)
        page.goto(f"{base}/sessions?session={sid}")
        _idle(page)
        viewer = page.locator("[data-pxp-viewer]")
        expect(viewer).to_have_attribute("data-drawn", re.compile(r"[1-9]"), timeout=90_000)
        shown = page.evaluate("() => window.pxpViewer()")
        assert (shown["width"], shown["height"]) == (400, 300), shown
    stranger = browser.new_context(viewport=VIEWPORT)
    try:
        for u in media:  # every media URL of the logged-in page, replayed without the login cookie
            r = stranger.request.get(u)
            if r.ok and r.headers.get("content-type", "").startswith("image/"):  # the app's page icon
                with Image.open(io.BytesIO(r.body())) as im:
                    assert im.size != (400, 300), f"{u} gives the case image without login"
    finally:
        stranger.close()


def test_cookies_copied_before_logout_are_refused_after_it(harm_server: tuple[str, str], browser: Any) -> None:
    from playwright.sync_api import expect

    base, _ = harm_server
    with _logged_in(browser, base, ANN[0]) as (context, page):
        expect(page.get_by_text(f"Logged in as {ANN[1]} (annotator)")).to_be_visible(timeout=90_000)
        copied = [c for c in context.cookies() if c["name"].startswith("_streamlit_user")]
        assert copied
        _log_out(page, base)
    thief = browser.new_context(viewport=VIEWPORT)
    thief.add_cookies(copied)
    page = thief.new_page()
    try:
        page.goto(f"{base}/annotate")
        _idle(page)
        expect(page.get_by_text("This pxp server requires login.")).to_be_visible(timeout=90_000)
        expect(page.get_by_text("You logged out after this login was made: log in again.")).to_be_visible()
        expect(page.get_by_text("Logged in as")).to_have_count(0)
        expect(page.get_by_text("The machine now says")).to_have_count(0)
    finally:
        thief.close()
