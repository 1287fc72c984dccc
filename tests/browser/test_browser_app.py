"""The app in a real browser: Playwright driving Debian's chromium against `streamlit run`.

A newcomer's path (demo data loaded on first start, the simulated agent) annotated to
the end with the keyboard shortcuts (tags and the two Yes/No questions); an <img onerror>/<script> payload in an LLM
explanation stays inert text; screenshots go to artifacts/ (gitignored).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.running.pxp.live.turns import machine_step
from pxp.storage.store import get_engine
from pxp.storage.tables import Annotator, Message, Session
from tests.app.test_app import Says
from tests.factories import make_rad

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
DOCS_PNG = ROOT / "docs" / "annotate.png"
CHROMIUM = "/usr/bin/chromium"
PAYLOAD = (
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> '
    "[click me](http://evil.example/x) ![pic](http://evil.example/p.png) http://evil.example/y"
)

pytestmark = pytest.mark.browser


def launch(pw: Any) -> Any:
    """Debian's chromium, headless, without its own background traffic."""
    return pw.chromium.launch(
        executable_path=CHROMIUM, headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync"],
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_streamlit(env: dict[str, str], tmp_path: Path, attempts: int = 5,
                     pick: Callable[[], int] = _free_port,
                     script: Path = ROOT / "streamlit_app.py") -> tuple[Any, str, IO[bytes]]:
    """`streamlit run` of the app (or `script`) on a free port; (process, base URL, its log).

    The port is free when picked but another process may take it before Streamlit binds
    it: Streamlit then exits ("Port N is not available"), and we retry on a new port. The
    server counts as up only when it answers /_stcore/health, is still alive (not another
    server answering on that port) and has logged its own URL.
    """
    last = ""
    for attempt in range(attempts):
        port = pick()
        path = tmp_path / f"server-{attempt}.log"
        log = path.open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script),
             "--server.headless", "true", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as r:
                    if r.status == 200 and proc.poll() is None and f":{port}" in path.read_text(errors="replace"):
                        return proc, base, log
            except OSError:
                pass
            time.sleep(0.2)
        _stop(proc)
        log.close()
        last = path.read_text(errors="replace")
        if "not available" not in last:  # not a lost port race: a real failure
            break
    raise RuntimeError("streamlit did not start: " + last[-2000:])


def _stop(proc: Any) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def need_chromium() -> None:
    """Skip without chromium on a workstation; in CI (CI=true) it is an error."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")


@contextlib.contextmanager
def serving(url: str, tmp_path: Path) -> Iterator[str]:
    """The app on the database `url` (`streamlit run`, logged in tmp_path) for the block: its base URL."""
    env = {**os.environ, "PXP_DATABASE_URL": url, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc, base, log = _start_streamlit(env, tmp_path)
    try:
        yield base
    finally:
        _stop(proc)
        log.close()


@contextlib.contextmanager
def held_machine(tmp_path: Path, *, per_label: int, size: tuple[int, int],
                 holds: Callable[[Any], bool]) -> Iterator[tuple[str, threading.Event]]:
    """The app on a live RAD experiment of films, nothing prepared ahead, whose LLM machine (the local wire-format
    server) answers a request `holds` picks only once the test sets the event: its base URL and the event."""
    from tests.factories import make_rad_images
    from tests.llm_server import FakeLLM, answer, checker_reply

    go = threading.Event()

    def reply(req: Any) -> Any:
        if req.is_checker:
            return checker_reply(req)
        if holds(req):
            go.wait(120)
        return answer("Pneumonia", "Patchy consolidation in the left lower zone.")

    url = f"sqlite:///{tmp_path / 'held.db'}"
    engine = get_engine(url)
    make_rad_images(engine, name="films", per_label=per_label, size=size)
    with FakeLLM(reply) as llm:
        create_live_experiment(engine, dataset="films", name="films", machine="openai:gpt-test",
                               checker="lexical", base_url=llm.openai_url, prepare=0)
        env = {**os.environ, "PXP_DATABASE_URL": url, "OPENAI_API_KEY": "sk-test-not-a-key",
               "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
        proc, base, log = _start_streamlit(env, tmp_path)
        try:
            yield base, go
        finally:
            go.set()
            _stop(proc)
            log.close()


@contextlib.contextmanager
def app_page(env: dict[str, str], tmp_path: Path, width: int = 1280, height: int = 720) -> Iterator[tuple[Any, str]]:
    """A browser page (width × height) and the base URL of `streamlit run` of the app with `env`; both stopped
    after. The page is open before the server starts, so it can be sent there the moment the server answers, as
    a user does who opens pxp as soon as it is up (on a fresh database, first start's demo is then still being
    made: the server begins it as it starts)."""
    from playwright.sync_api import sync_playwright

    need_chromium()
    with sync_playwright() as pw:
        browser = launch(pw)
        started: tuple[Any, str, IO[bytes]] | None = None
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            started = _start_streamlit(env, tmp_path)
            yield page, started[1]
        finally:
            browser.close()
            if started is not None:
                _stop(started[0])
                started[2].close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    need_chromium()
    url = f"sqlite:///{tmp_path / 'browser.db'}"
    engine = get_engine(url)
    from pxp.running.pxp.controlled.demo import ensure_demo

    ensure_demo(engine)  # what first start does; done here so seeding below does not race it
    make_rad(engine, name="toy-rad")
    eid = create_live_experiment(engine, dataset="toy-rad", name="live-payload")
    me = ensure_annotator(engine, name="Dr Keyboard")
    sid = claim_next(engine, experiment_id=eid, annotator_id=me)
    assert sid is not None
    assert machine_step(engine, sid, Says("Pneumonia", PAYLOAD)) is not None
    with serving(url, tmp_path) as base:
        yield base, url


def test_streamlit_start_retries_on_a_port_taken_after_it_was_picked(tmp_path: Path) -> None:
    """The port race of the fixture: another process listens on the picked port first."""
    env = {**os.environ, "PXP_DATABASE_URL": f"sqlite:///{tmp_path / 'race.db'}",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        picks = iter([busy])
        proc, base, log = _start_streamlit(env, tmp_path, pick=lambda: next(picks, None) or _free_port())
        try:
            assert base != f"http://127.0.0.1:{busy}" and proc.poll() is None
            assert "not available" in (tmp_path / "server-0.log").read_text()
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
                assert r.status == 200
        finally:
            _stop(proc)
            log.close()


#: counts the script runs the page has seen finish (Streamlit marks its root with the run state)
_RUNS = """() => { if (window.__pxpRuns === undefined) {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app) return -1;
    window.__pxpRuns = 0;
    let last = app.getAttribute("data-test-script-state");
    new MutationObserver(() => { const now = app.getAttribute("data-test-script-state");
      if (now === "notRunning" && last !== "notRunning") window.__pxpRuns += 1; last = now; })
      .observe(app, {attributes: true, attributeFilter: ["data-test-script-state"]});
  }
  return window.__pxpRuns; }"""
_IDLE = """([seen, since]) => { const app = document.querySelector('[data-testid="stApp"]');
  const runs = window.__pxpRuns === undefined ? -1 : window.__pxpRuns;
  const idle = app && app.getAttribute("data-test-script-state") !== "running"
    && app.getAttribute("data-test-script-state") !== "rerunRequested"
    && !document.querySelector('[data-testid="stSpinner"]');
  return idle && ((runs >= 0 && runs > seen) || Date.now() - since > 300); }"""
_seen: dict[int, int] = {}


def _idle(page: object) -> None:
    """Wait until Streamlit has finished the script run the last action started: a run finished since the
    last wait (counted in the page), or, when none starts within 0.3 s, none was started."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    seen = _seen.get(id(page), -1)
    page.wait_for_function(_IDLE, arg=[seen, page.evaluate("() => Date.now()")], timeout=90_000, polling=20)
    _seen[id(page)] = int(page.evaluate(_RUNS))


def _pick_dataset(page: Any, option: str) -> None:
    """Choose a dataset in the sidebar's picker: its list opened by a click, or by ArrowDown when the click did not
    open it (headless chromium sometimes needs that), each waited for with a deadline."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wanted = page.get_by_role("option", name=option)
    for _ in range(4):
        page.get_by_label("Dataset").click()
        for key in (None, "ArrowDown"):
            if key:
                page.keyboard.press(key)
            try:
                wanted.wait_for(state="visible", timeout=10_000)
            except PlaywrightTimeout:
                continue
            wanted.click()
            return
        page.keyboard.press("Escape")
    raise AssertionError(f"the Dataset picker never listed {option!r}")


def _annotate_as(page: Any, base: str, who: str, dataset: str) -> None:
    """Open Annotate, give the name `who` and pick `dataset` (e.g. "demo-drug (drug)")."""
    from playwright.sync_api import expect

    page.goto(f"{base}/annotate")
    name = page.get_by_label("Your name")
    expect(name).to_be_visible(timeout=90_000)
    name.fill(who)
    name.press("Enter")
    _idle(page)
    _pick_dataset(page, dataset)
    _idle(page)


_FORM_KEY = """() => { const k = [...document.querySelectorAll('[class*="st-key-annotate_case_"]')]
    .flatMap((e) => [...e.classList]).filter((x) => /^st-key-annotate_case_[0-9]+$/.test(x)).pop();
  if (!k) return null;
  const sid = k.slice("st-key-annotate_case_".length);
  const e = [...document.querySelectorAll(`[class*="st-key-annotate_form_${sid}_"]`)].pop();
  return e ? [...e.classList].find((x) => x.startsWith("st-key-annotate_form_")) : null; }"""


def _session(url: str, who: str, page: Any = None) -> tuple[int, list[Message], str]:
    """The annotator's session on screen (the one whose reply form the page shows) when `page` is
    given, else their newest; with the next case prepared in the background, the newest is
    usually not the one on screen."""
    if page is not None:  # the case on screen, once its reply form is there (a rerun may still show the last one)
        key = page.wait_for_function(_FORM_KEY, timeout=90_000).json_value()
        sid = int(str(key).split("_")[-2])
        return (sid, *_session_of(url, sid))
    engine = get_engine(url)
    with DB(engine) as db:
        a = db.exec(select(Annotator).where(Annotator.name == who)).one()
        rows = db.exec(select(Session).where(Session.annotator_id == a.id).order_by(Session.id)).all()
        s = rows[-1]
        msgs = list(db.exec(select(Message).where(Message.session_id == s.id).order_by(Message.j)).all())
        return s.id or 0, msgs, s.status


def test_annotate_with_the_keyboard_and_inert_payload(server: tuple[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, url = server
    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1700})
            page.on("request", lambda r: requests.append(r.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{base}/annotate")
            name = page.get_by_label("Your name")
            expect(name).to_be_visible(timeout=90_000)
            name.fill("Dr Keyboard")
            name.press("Enter")
            _idle(page)

            # 1. the payload (toy-rad, where Dr Keyboard holds the seeded session) stays text
            _pick_dataset(page, "toy-rad (rad)")
            _idle(page)
            expect(page.get_by_text("window.__pwned=2", exact=False).first).to_be_visible()
            assert page.evaluate("() => window.__pwned === undefined")
            assert page.locator('img[src="x"]').count() == 0
            assert page.locator('a[href*="evil.example"]').count() == 0
            assert page.locator('[data-testid="stMarkdown"] script').count() == 0
            page.screenshot(path=str(ARTIFACTS / "annotate-payload.png"), full_page=True)

            # 2. a demo DRUG case to the end: type the answer, Alt+1 (RATIFY), Ctrl+Enter (send)
            _pick_dataset(page, "demo-drug (drug)")
            _idle(page)
            expect(page.get_by_text("Simulated agent").first).to_be_visible()
            expect(page.get_by_text("Target molecule", exact=False)).to_be_visible()  # the DRUG case, not the last
            sid, msgs, _ = _session(url, "Dr Keyboard", page)
            deadline = time.monotonic() + 60  # the page shows the case as the machine's INIT is being stored
            while not msgs and time.monotonic() < deadline:
                time.sleep(0.1)
                sid, msgs, _ = _session(url, "Dr Keyboard", page)
            assert [m.tag for m in msgs] == ["INIT"]
            smiles = page.get_by_label("My prediction: reactant SMILES (separate with a dot)").last  # the newest form
            smiles.fill(msgs[0].prediction)
            smiles.press("Enter")
            _idle(page)
            expect(page.get_by_text("Canonical form:")).to_be_visible()
            expl = page.get_by_label("My explanation").last
            expl.fill(msgs[0].explanation)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            _idle(page)
            page.keyboard.press("Alt+1")
            _idle(page)
            expect(page.get_by_text("you chose it", exact=False)).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "annotate-drug.png"), full_page=True)
            page.keyboard.press("Control+Enter")
            _idle(page)
            expect(page.get_by_text("is finished", exact=False)).to_be_visible(timeout=90_000)
            # the sidebar's count includes the case just finished (it used to lag by one)
            expect(page.get_by_text(re.compile(r"^1 of \d+ cases done$"))).to_be_visible()
            # and the next case is on screen, ready for a reply
            expect(page.get_by_text("Your reply (message 2)")).to_be_visible(timeout=90_000)
            _idle(page)
            page.screenshot(path=str(ARTIFACTS / "annotate-finished.png"), full_page=True)

            # 3. a double press of Send stores the human's message once, and one machine reply
            sid2, msgs2, _ = _session(url, "Dr Keyboard", page)
            assert sid2 != sid and [m.tag for m in msgs2] == ["INIT"]
            smiles = page.get_by_label("My prediction: reactant SMILES (separate with a dot)").last  # the newest form
            smiles.fill("CC(=O)Cl.Oc1ccccc1C(=O)O")
            smiles.press("Enter")
            _idle(page)
            # the two questions by keyboard: Alt+6 (prediction does not match), Alt+8 (nor the
            # explanation): the AGENT rule tags REFUTE, which says why
            page.get_by_label("My explanation").last.fill("Acylation of the phenol with acetyl chloride.")
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            _idle(page)
            page.keyboard.press("Alt+6")
            _idle(page)
            page.keyboard.press("Alt+8")
            _idle(page)
            expect(page.get_by_text("Your message will be tagged", exact=False)).to_be_visible()
            page.keyboard.press("Control+Enter")
            page.wait_for_timeout(30)
            page.keyboard.press("Control+Enter")
            _idle(page)
            expect(page.get_by_text("Your reply (message 4)")).to_be_visible(timeout=90_000)
            _idle(page)
            _, msgs2, _ = _session(url, "Dr Keyboard", page)
            assert [(m.j, m.sender) for m in msgs2] == [(1, "machine"), (2, "human"), (3, "machine")]
            assert msgs2[1].tag == "REFUTE"
            page.screenshot(path=str(ARTIFACTS / "annotate-message-4.png"), full_page=True)
        finally:
            browser.close()
    engine = get_engine(url)
    with DB(engine) as db:
        done = db.get(Session, sid)
        assert done is not None and done.status == "finished" and done.stop_reason == "ratified"
        tags = [m.tag for m in db.exec(select(Message).where(Message.session_id == sid).order_by(Message.j))]
    assert tags == ["INIT", "RATIFY", "RATIFY"]
    assert not dialogs
    assert not [r for r in requests if "evil.example" in r or r.endswith("/x")], requests


def test_keys_pressed_faster_than_the_page_redraws_are_kept(server: tuple[str, str]) -> None:
    """An expert's practised keys, each pressed before the previous one's rerun has reached the page: Alt+5
    (the prediction matches: filled with the machine's), Alt+8, Ctrl+Enter a few ms apart send REFUTE with
    the machine's prediction (Streamlit would otherwise send the form's old values with the second key and
    lose the first); a key meant for a form that is gone is dropped: a double Alt+A sends one message. Each
    new reply form has the focus as soon as it is in the page (not only once the scroll script loads), also
    after the sidebar has changed (its New live experiment form opened)."""
    from playwright.sync_api import expect, sync_playwright

    base, url = server
    who = "Dr Fast"
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport=VIEW)
            page.goto(f"{base}/annotate?annotator=Dr+Fast&role=Radiologist&dataset=demo-rad")
            sid, msgs, _ = _session(url, who, page)
            _idle(page)
            page.get_by_text("New live experiment").click()  # the sidebar changes; the keyboard script stays
            expect(page.get_by_label("Name (optional)")).to_be_visible(timeout=90_000)
            _idle(page)
            page.evaluate(_FOCUS_AS_DRAWN)
            # a disagreement carries its reason: the first reply types one, the next keep it (the form holds the
            # expert's last explanation), the last types a new one
            for gap, typed in ((5, "Right basal opacity"), (20, None), (40, None),
                               (10, "Left basal opacity, typed fast")):
                j = len(msgs) + 1
                _ready(page, sid, j)
                page.evaluate("() => document.activeElement && document.activeElement.blur()")
                if typed:  # typed, and the keys pressed in the field: the text goes with the Send
                    page.get_by_label("My explanation").last.fill(typed)
                for key in ("Alt+5", "Alt+8", "Control+Enter"):
                    page.keyboard.press(key)
                    page.wait_for_timeout(gap)
                deadline = time.monotonic() + 90
                while len(msgs) < j and time.monotonic() < deadline:  # the human's message j stored
                    time.sleep(0.05)
                    msgs, status = _session_of(url, sid)
                assert len(msgs) >= j, f"message {j} was never sent: a key was lost ({gap} ms apart)"
                mine = msgs[j - 1]
                assert typed is None or mine.explanation == typed, (mine.explanation, mine.tag)
                tag = "REVISE" if typed and j > 2 else "REFUTE"  # a new explanation of mine after message 2: a revision
                assert (mine.sender, mine.tag, mine.prediction) == ("human", tag, msgs[j - 2].prediction), gap
                while len(msgs) < j + 1 and status == "open" and time.monotonic() < deadline:  # and its reply
                    time.sleep(0.05)
                    msgs, status = _session_of(url, sid)
                if status != "open":
                    break
            sid, msgs, _ = _session(url, who, page)
            j = len(msgs) + 1
            _ready(page, sid, j)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            page.keyboard.press("Alt+A")
            page.wait_for_timeout(10)
            page.keyboard.press("Alt+A")  # for the same form: that form is gone when the page is redrawn
            # the next form (this case's or the next case's), its case header drawn too
            nsid, nj = (int(x) for x in str(page.wait_for_function(_NEXT_FORM, arg=f"{sid}_{j}", timeout=90_000)
                                            .json_value()).split("_"))
            _ready(page, nsid, nj)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            page.keyboard.press("Alt+6")  # held keys go in order: a second Alt+A would have gone before this
            no = page.locator(f".st-key-annotate_{nsid}_{nj}_match_no button")
            expect(no).to_have_attribute("kind", "primary", timeout=90_000)
            msgs, _ = _session_of(url, sid)
            assert [m.j for m in msgs if m.sender == "human" and m.j >= j] == [j]
            assert len(_session_of(url, nsid)[0]) == nj - 1, "nothing sent on the next form"
            seen = page.evaluate("() => window.__pxpFormsSeen")
            assert len(seen) >= 3 and all(focused for _, focused in seen), seen
        finally:
            browser.close()


#: records, for each new reply form, whether the focus is in it when it is first in the page with its controls
#: (this observer runs after the page's own, which was installed before it)
_FOCUS_AS_DRAWN = """() => {
  const newest = () => { const f = [...document.querySelectorAll('[class*="st-key-annotate_form_"]')].pop();
    return [f, f && [...f.classList].find((x) => x.startsWith("st-key-annotate_form_"))]; };
  let last = newest()[1];
  window.__pxpFormsSeen = [];
  new MutationObserver(() => {
    const [f, k] = newest();
    if (!k || k === last || !f.querySelector("button, input, textarea")) return;
    last = k;
    window.__pxpFormsSeen.push([k, f.contains(document.activeElement)]);
  }).observe(document.body, {childList: true, subtree: true});
}"""


#: "sid_j" of the newest reply form once it is not `old` and its case's header is drawn
_NEXT_FORM = """(old) => {
  const f = [...document.querySelectorAll('[class*="st-key-annotate_form_"]')].pop();
  const k = f && [...f.classList].find((x) => x.startsWith("st-key-annotate_form_"));
  if (!k || k === "st-key-annotate_form_" + old) return null;
  const sj = k.slice("st-key-annotate_form_".length);
  return document.querySelector(`.st-key-annotate_case_${sj.split("_")[0]}`) ? sj : null; }"""


def _ready(page: Any, sid: int, j: int) -> None:
    """The reply form of message j of session sid is on the page and no run is going."""
    page.wait_for_selector(f".st-key-annotate_{sid}_{j}_send", timeout=90_000)
    _idle(page)


VIEW = {"width": 1280, "height": 720}


def _browser(pw: Any) -> Any:
    return pw.chromium.launch(
        executable_path=CHROMIUM, headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync"],
    )


def _in_view(page: Any, selector: str) -> bool:
    """Whether the element is wholly inside the viewport (no scrolling needed)."""
    return bool(page.evaluate(
        """(sel) => { const e = document.querySelector(sel); if (!e) return false;
             const r = e.getBoundingClientRect();
             return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }""", selector))


def _settled(page: Any, selectors: list[str], focus: str | None = None) -> None:
    """Wait (up to 10 s) until the elements are in view and, with `focus`, the focus is inside it; the
    callers then assert it, naming what is not."""
    import contextlib

    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(
            """([sels, focus]) => sels.every((sel) => { const e = document.querySelector(sel); if (!e) return false;
                 const r = e.getBoundingClientRect();
                 return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; })
               && (!focus || !!(document.activeElement && document.activeElement.closest(focus)))""",
            arg=[selectors, focus], timeout=10_000, polling=50)


def _form_ready(page: Any, sid: int, j: int) -> None:
    """The reply form of message j of session sid and its Send are in view and focused."""
    form, send = f".st-key-annotate_form_{sid}_{j}", f".st-key-annotate_{sid}_{j}_send"
    page.wait_for_selector(send, timeout=90_000)
    _idle(page)
    _settled(page, [send, f".st-key-annotate_{sid}_{j}_match_yes"], focus=form)  # the scroll script, after the render
    assert _in_view(page, send), f"Send of message {j} is below the fold"
    assert _in_view(page, f".st-key-annotate_{sid}_{j}_match_yes"), "the questions are in view"
    assert page.evaluate(f"() => !!document.activeElement.closest('{form}')"), "the form has the focus"


def _wait_draft(url: str, sid: int, explanation: str) -> None:
    """Wait until the reply typed in session sid is stored as a draft with this explanation."""
    from pxp.storage.tables import Draft

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with DB(get_engine(url)) as db:
            rows = db.exec(select(Draft).where(Draft.session_id == sid)).all()
        if any(explanation in str(r.content) for r in rows):
            return
        time.sleep(0.1)
    raise AssertionError(f"no draft with {explanation!r} was stored for session {sid}")


def _keys(page: Any, *keys: str) -> None:
    for k in keys:
        page.keyboard.press(k)
        _idle(page)


def test_rad_and_drug_sessions_by_keyboard_at_1280x720(server: tuple[str, str]) -> None:
    """Whole sessions answered by key at 1280×720, never scrolling or clicking.

    On the first case at 1280×720 the case header, both questions and Send are in view, and Tab
    goes prediction → explanation → answers without a stop on the picker's clear button. RATIFY
    is Alt+5, Alt+7, Ctrl+Enter (Yes fills the machine's answer) or the one chord Alt+A, whose
    line says what it sent; a reload keeps the annotator and the half-typed reply; after every Send
    the next reply form and its Send are in view and focused; the next case begins in view;
    a tag contradicting the expert's answers is refused and stores nothing; in DRUG each
    machine message has its proposed reaction drawn.
    """
    from playwright.sync_api import expect, sync_playwright

    base, url = server
    ARTIFACTS.mkdir(exist_ok=True)
    who = "Dr Flow"
    with sync_playwright() as pw:
        browser = _browser(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            requests: list[tuple[str, str]] = []  # (url, frame url)
            sent: list[str] = []  # websocket frames the page sends to the server
            page.on("websocket", lambda ws: ws.on("framesent", lambda f: sent.append("frame")))
            page.on("request", lambda r: requests.append((r.url, r.frame.url)))
            _annotate_as(page, base, who, "demo-rad (rad)")
            page.evaluate("() => document.activeElement && document.activeElement.blur()")

            # RAD case 1: a contradicting tag is refused, then REFUTE by the rule, then RATIFY
            _session(url, who, page)
            _idle(page)
            sid, msgs, _ = _session(url, who, page)
            # at 1280×720 the first case fits: its header, both questions and Send, no scrolling
            first = (f"annotate_case_{sid}", f"annotate_{sid}_2_match_yes", f"annotate_{sid}_2_agree_no",
                     f"annotate_{sid}_2_send")
            _settled(page, [f".st-key-{k}" for k in first])
            for key in first:
                assert _in_view(page, f".st-key-{key}"), f"{key} is below the fold at 1280×720"
            page.screenshot(path=str(ARTIFACTS / "annotate-1280x720-case-1.png"))
            page.set_viewport_size(VIEW)
            _keys(page, "Alt+6", "Alt+8", "Alt+1")
            expect(page.get_by_text("RATIFY contradicts your answers", exact=False)).to_be_visible()
            _keys(page, "Control+Enter")
            assert len(_session(url, who, page)[1]) == 1, "a refused tag stores nothing"
            page.screenshot(path=str(ARTIFACTS / "annotate-900-refused.png"))
            # No / No with the machine's prediction picked: Alt+0 back to the automatic tag, REFUTE;
            # the predictions match by content, whatever the No said (DESIGN §1, facts from content)
            pred = page.get_by_label("My prediction")
            pred.click()
            expect(page.get_by_role("option").first).to_have_text(msgs[0].prediction)  # machine's first
            page.keyboard.type(msgs[0].prediction[:4])
            page.keyboard.press("Enter")
            _idle(page)
            page.get_by_label("My explanation").last.fill("Volume loss behind the heart.")  # REFUTE says why
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            _idle(page)
            _keys(page, "Alt+0")
            expect(page.get_by_text("Your message will be tagged", exact=False)).to_be_visible()
            _keys(page, "Control+Enter")
            _form_ready(page, sid, 4)
            page.screenshot(path=str(ARTIFACTS / "annotate-900-rad-message-4.png"))
            _docs_screenshot(page)
            _, msgs, _ = _session(url, who, page)
            assert msgs[1].tag == "REFUTE" and (msgs[1].match, msgs[1].agree) == (True, False)
            # a half-typed reply and the annotator survive a reload (name, role, dataset in the URL;
            # the reply a draft); Tab from the prediction goes to the explanation, not a clear button
            page.get_by_label("My prediction").click()
            page.keyboard.press("Control+a")
            page.keyboard.type("Pneumoth")
            page.keyboard.press("Tab")  # Tab with a filter typed picks the highlighted finding: nothing lost
            _idle(page)
            expect(page.get_by_label("My prediction")).to_have_value("Pneumothorax")
            page.get_by_label("My prediction").focus()  # (the picked value shows its clear button)
            page.keyboard.press("Tab")
            assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "My explanation"
            _keys(page, "Alt+6")
            page.get_by_label("My explanation").last.fill("")  # the form holds my last explanation: typed anew
            page.get_by_label("My explanation").last.focus()
            page.keyboard.type("Apical pleural line")  # and no Tab: the draft is kept as typing pauses
            _wait_draft(url, sid, "Apical pleural line")
            assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "My explanation"
            page.reload()
            page.wait_for_selector(f".st-key-annotate_{sid}_4_send", timeout=90_000)
            _idle(page)
            expect(page.get_by_label("Your name")).to_have_value(who)
            expect(page.get_by_label("My prediction")).to_have_value("Pneumothorax")
            expect(page.get_by_label("My explanation").last).to_have_value("Apical pleural line")
            # the reloaded page's form has the focus (no Tabs through the sidebar); the question's buttons show
            # the recorded fact (MATCH over the content), whatever the draft's No said, as the line under them
            _settled(page, [f".st-key-annotate_{sid}_4_send"], focus=f".st-key-annotate_form_{sid}_4")
            assert page.evaluate(f"() => !!document.activeElement.closest('.st-key-annotate_form_{sid}_4')"), \
                "the reloaded reply form has the focus"
            same = msgs[2].prediction == "Pneumothorax"
            shown, other = ("yes", "no") if same else ("no", "yes")
            expect(page.locator(f".st-key-annotate_{sid}_4_match_{shown} button")).to_have_attribute("kind", "primary")
            expect(page.locator(f".st-key-annotate_{sid}_4_match_{other} button")).to_have_attribute(
                "kind", "secondary")
            if same:
                expect(page.get_by_text("Recorded as matching", exact=False)).to_be_visible()
            assert len(_session(url, who, page)[1]) == 3, "a draft is not a message"
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            _keys(page, "Alt+A")  # the one chord: the machine's answer, RATIFY, whatever the draft said
            expect(page.get_by_text("as RATIFY by Alt+A", exact=False).first).to_be_visible(timeout=90_000)
            msgs, _ = _session_of(url, sid)
            assert msgs[3].tag == "RATIFY" and msgs[3].prediction == msgs[2].prediction, "the chord ratified"
            for _ in range(6):  # RATIFY in three keys until the case ends
                if _session_of(url, sid)[1] != "open":
                    break
                _keys(page, "Alt+5", "Alt+7", "Control+Enter")
                for _ in range(100):  # until the machine has replied or the case ended
                    msgs2, status = _session_of(url, sid)
                    if status != "open" or len(msgs2) % 2 == 1:
                        break
                    time.sleep(0.1)  # (polling the database, not waiting for the page)
                if status != "open":
                    break
                _form_ready(page, sid, len(msgs2) + 1)
            _, done, status = (sid, *_session_of(url, sid))
            assert status == "finished" and done[-2].tag == "RATIFY" and done[-2].sender == "human"
            # case 2 begins in view, its reply form focused, and the finished case is one line
            expect(page.get_by_text(re.compile(r"^Case 2 of \d+"))).to_be_attached(timeout=90_000)
            sid2, msgs2, _ = _session(url, who, page)
            assert sid2 != sid
            _form_ready(page, sid2, 2)
            page.screenshot(path=str(ARTIFACTS / "annotate-900-rad-case-2.png"))
            expect(page.get_by_text(re.compile(r"^Case 2 of \d+"))).to_be_in_viewport()
            expect(page.get_by_text("is finished", exact=False)).to_be_in_viewport()
            page.screenshot(path=str(ARTIFACTS / "annotate-900-rad-case-2.png"))

            # the X-ray viewer zooms with the wheel and pans by drag in the browser (no rerun)
            viewer = page.locator("[data-pxp-viewer]")
            expect(viewer).to_have_attribute("data-drawn", re.compile(r"[1-9]"), timeout=90_000)
            frame_el = viewer.bounding_box()
            assert frame_el is not None
            page.mouse.move(frame_el["x"] + 150, frame_el["y"] + 150)
            page.mouse.wheel(0, -600)
            page.wait_for_function("() => window.pxpViewer().scale > 1.5", timeout=60_000)
            zoomed = page.evaluate("() => window.pxpViewer()")
            page.mouse.down()
            page.mouse.move(frame_el["x"] + 220, frame_el["y"] + 190)
            page.mouse.up()
            panned = page.evaluate("() => window.pxpViewer()")
            assert zoomed["scale"] > 1.5 and panned["x"] > zoomed["x"], (zoomed, panned)
            # window/level by right-drag, in the browser: no message to the server while dragging,
            # the zoom and pan kept, the settled window sent once on release
            before_wl = viewer.get_attribute("data-wl")
            page.mouse.move(frame_el["x"] + 150, frame_el["y"] + 150)
            page.mouse.down(button="right")
            quiet = len(sent)
            for step in range(1, 6):
                page.mouse.move(frame_el["x"] + 150 + 12 * step, frame_el["y"] + 150 - 6 * step)
            expect(viewer).not_to_have_attribute("data-wl", before_wl or "", timeout=60_000)
            during = len(sent) - quiet
            page.mouse.up(button="right")
            windowed = page.evaluate("() => window.pxpViewer()")
            assert during == 0, "window/level asked the server while dragging"
            assert windowed["window"] > 255 and windowed["center"] > 127.5, windowed
            assert (windowed["scale"], windowed["x"], windowed["y"]) == (panned["scale"], panned["x"], panned["y"])
            # the viewer's image came in the page's session (no media URL); the scroll script
            # (a srcdoc frame) fetches nothing from anywhere
            icons = page.evaluate("() => [...document.querySelectorAll('link[rel*=icon]')].map((l) => l.href)")
            assert not [u for u, _ in requests if "/media/" in u and u.endswith(".png") and u not in icons]
            assert not [u for u, f in requests if f == "about:srcdoc" and not u.startswith("data:")]

            # DRUG: the machine's step is drawn; RATIFY in three keys, no clicks
            _pick_dataset(page, "demo-drug (drug)")
            _idle(page)
            _session(url, who, page)
            _idle(page)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            dsid, dmsgs, _ = _session(url, who, page)
            steps = page.get_by_text("The machine's proposed step", exact=False)
            expect(steps.first).to_be_visible()
            assert steps.count() == sum(m.sender == "machine" for m in dmsgs)
            page.screenshot(path=str(ARTIFACTS / "annotate-900-drug.png"))
            _keys(page, "Alt+6", "Alt+8", "Alt+2")
            smiles = page.get_by_label("My prediction: reactant SMILES (separate with a dot)").last  # the newest form
            smiles.fill("CC(=O)Cl.Oc1ccccc1C(=O)O")
            smiles.press("Enter")
            _idle(page)
            page.get_by_label("My explanation").last.fill("Acylation of the phenol with acetyl chloride.")  # says why
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            _idle(page)
            _keys(page, "Control+Enter")
            _form_ready(page, dsid, 4)
            _, dmsgs, _ = _session(url, who, page)
            machine_msgs = [m for m in dmsgs if m.sender == "machine"]
            assert len(machine_msgs) == 2
            expect(page.get_by_text("The machine's proposed step", exact=False)).to_have_count(2)
            expect(page.get_by_text("The human's proposed step", exact=False)).to_have_count(1)  # mine, drawn too
            assert page.locator(f".st-key-annotate_form_{dsid}_4").count() == 1
            page.screenshot(path=str(ARTIFACTS / "annotate-900-drug-message-4.png"))
        finally:
            browser.close()


def _docs_screenshot(page: Any) -> None:
    """The README's picture of the Annotate page, `docs/annotate.png`: a RAD case at message 4.
    Rewritten with PXP_UPDATE_DOCS_SCREENSHOT=1 (pixels vary with fonts, so not on every run);
    the one committed must be a PNG of this window's size."""
    shot = page.screenshot()
    if os.environ.get("PXP_UPDATE_DOCS_SCREENSHOT") == "1":
        DOCS_PNG.write_bytes(shot)
    committed = DOCS_PNG.read_bytes()
    assert committed[:8] == b"\x89PNG\r\n\x1a\n" and committed[16:24] == shot[16:24], "docs/annotate.png: size"


def _session_of(url: str, sid: int) -> tuple[list[Message], str]:
    engine = get_engine(url)
    with DB(engine) as db:
        s = db.get(Session, sid)
        assert s is not None
        msgs = list(db.exec(select(Message).where(Message.session_id == sid).order_by(Message.j)).all())
        return msgs, s.status
