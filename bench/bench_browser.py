"""What the expert and the researcher wait for, in a real browser (README "The app"; docs/development.md, Benchmarks).

Playwright drives Debian's chromium against a real `streamlit run` of the checkout whose pxp is imported (this one,
or the worktree PYTHONPATH names, for "before" figures: bench/checkout.py), as tests/browser/ does. Prints:

(a) Annotate, the simulated machine on demo data: Send → the next reply form ready (its Send visible, the
    prediction field focused), p50/p95; Sends alternate the Alt+A chord (RATIFY: the case usually ends, the next
    begins) and Alt+5 Alt+8 Ctrl+Enter (REFUTE: the case goes on);
(b) Annotate, an LLM machine against the local wire-format server (tests/llm_server.py) injecting 0.8 s to the
    first token, 40 tokens/s for a 300-token reply and 0.4 s per checker call: Send (REFUTE) → the first
    machine text visible and Send → the next form ready;
(c) the start of a new case (n = 2: each Send ends one) with the next case prepared (`prepare` 1) and without (0),
    on digitised-film-sized images (2400×2000, shown at 2,048 px): the next form ready, and the next film drawn;
(d) Analytics (Table 1) and its Compare view opened cold from a URL, each visit a new Streamlit session, in a new
    browser profile (no cached files) and in a new tab of a browser that opened the app before (its static files
    cached); on demo data plus a second demo-rad experiment (so Compare pairs two) and on two 10,000-session
    experiments (bench/bench_analytics.py's bulk load); each page's first visit after the server started (its
    data computed then, not yet cached) is given apart;
(e) Annotate, a demo DRUG case at 1280×720: Alt+M → the molecule editor over the window with Ketcher ready and
    pre-filled, the first time (pressed `--read` seconds after the reply form is ready: the chemist reading the
    case while the editor loads in the background) and later times (Esc between), and the first time pressed as
    soon as the form is ready (in a new browser context: the editor still starting);
(f) first start on a fresh database (each run a new database and a new `streamlit run`, PXP_DEMO_FILMS=0): from
    the page asked for (and from the server's start) to the first text drawn, to the line saying what is being
    made with its progress bar, and to Home.

    python bench/bench_browser.py [--quick] [--only a,b,c,d,e,f] [--visits N] [--sends N] [--film WxH]
        [--read S]

Figures only; a loaded machine slows everything (2 cores here).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import checkout  # noqa: F401  (this checkout on the import path)
from sqlalchemy import text

from pxp.storage.store import get_engine
from tests.browser.test_browser_app import _idle, _start_streamlit, _stop, launch
from tests.llm_server import FakeLLM, Reply, Request

VIEW = {"width": 1400, "height": 900}
FILM_SIZE = (2400, 2000)  # (c): a digitised chest film's size (the viewer gets it at 2,048 px, 8 bits); --film
EXPLANATION = ("Frontal chest radiograph. Patchy airspace consolidation in the left lower zone with air "
               "bronchograms; no effusion, heart size normal. ") * 8  # about 300 tokens

POLL_MS = 25  # page conditions are checked this often (each check costs the page little: no layout forced)

# --- page conditions (JS) -----------------------------------------------------------

#: the newest reply form, if it is not `old`, is ready: its Send visible and (with `focus`) its prediction field
#: focused
FORM_READY = """({old, focus}) => {
  const f = [...document.querySelectorAll('[class*="st-key-annotate_form_"]')].pop();
  if (!f) return null;
  const key = [...f.classList].find((c) => c.startsWith('st-key-annotate_form_'));
  if (key === old) return null;
  const send = document.querySelector('.' + key.replace('annotate_form_', 'annotate_') + '_send button');
  if (!send || send.getBoundingClientRect().height === 0) return null;
  const a = document.activeElement;
  if (!focus) return key;
  return a && f.contains(a) && (a.getAttribute('aria-label') || '').startsWith('My prediction') ? key : null;
}"""
#: the machine's text is on screen: its reply streaming in, or the form after it (a reply shown whole)
MACHINE_TEXT = """(arg) => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
  .some((e) => e.textContent.includes('The machine is writing')) || (FORM_READY)(arg)""".replace(
    "(FORM_READY)", f"({FORM_READY})")
#: the viewers on the page (they live in shadow roots)
VIEWERS = """const all = (root) => [...root.querySelectorAll('*')].flatMap((e) => e.shadowRoot
    ? [...e.shadowRoot.querySelectorAll('[data-pxp-viewer]'), ...all(e.shadowRoot)] : []);
  const viewers = [...document.querySelectorAll('[data-pxp-viewer]'), ...all(document)];"""
#: before a Send: the film on screen is marked as the old one (its image id, where the viewer gives one)
MARK_FILM = "() => { " + VIEWERS + """
  viewers.forEach((v) => { v.dataset.benchOld = '1'; });
  return (viewers.find((v) => v.dataset.image) || {dataset: {}}).dataset.image || ''; }"""
#: a film drawn that is not the old one: a new viewer drawn, or the viewer's image changed
FILM = "(old) => { " + VIEWERS + """
  return viewers.some((v) => v.dataset.drawn && (!v.dataset.benchOld || (v.dataset.image || old) !== old)); }"""
#: a page is drawn: its script run over, `marker` text on screen, every table in view drawn, the fonts loaded
PAGE_DONE = """(marker) => {
  if (document.querySelector('[data-testid="stStatusWidget"] button')) return false;
  if (document.querySelector('[data-testid="stSpinner"], [data-testid="stSkeleton"]')) return false;
  const said = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
    .some((e) => e.textContent.includes(marker));
  if (!said && !document.querySelector('[data-testid="stAlert"]')) return false;
  if ([...document.querySelectorAll('[data-testid="stDataFrame"]')]
      .some((d) => d.checkVisibility() && !d.closest('details:not([open])') && !d.querySelector('canvas')))
    return false;
  return document.fonts.status === 'loaded';
}"""


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def line(what: str, xs: list[float]) -> str:
    if not xs:
        return f"  {what:<46} (no samples)"
    return (f"  {what:<46} p50 {pct(xs, .5):6.2f} s   p95 {pct(xs, .95):6.2f} s   "
            f"(n={len(xs)}, max {max(xs):.2f} s)")


def wait_for(page: Any, condition: str, arg: Any, what: str) -> Any:
    """The condition's value once truthy; on a timeout, a screenshot in artifacts/ and one line."""
    try:
        return page.wait_for_function(condition, arg=arg, timeout=120_000, polling=POLL_MS).json_value()
    except Exception:
        shot = Path("artifacts") / "bench-browser-timeout.png"
        shot.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(shot))
        raise SystemExit(f"not seen in 120 s: {what} (see {shot})") from None


class Server:
    """A real `streamlit run` of the checkout on a database (the browser tests' launcher)."""

    def __init__(self, url: str, tmp: Path, **env: str) -> None:
        self.env = {**os.environ, "PXP_DATABASE_URL": url, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", **env}
        self.proc, self.base, self.log = _start_streamlit(self.env, tmp)

    def close(self) -> None:
        _stop(self.proc)
        self.log.close()


# --- (a) (b) (c): the Annotate page ----------------------------------------------------------------------------------

def llm_reply(req: Request) -> Reply:
    """0.4 s per checker call (always No: the case goes on); a 300-token answer streamed at 40 tokens/s after 0.8 s."""
    if req.is_checker:
        time.sleep(0.4)
        return Reply(text="No")
    pieces = max(1, len(EXPLANATION) // 12)
    data = {"prediction": "Pneumonia", "explanation": EXPLANATION}
    if req.body.get("stream"):
        return Reply(data=data, first_delay=0.8, piece_delay=(300 / 40) / pieces)
    time.sleep(0.8 + 300 / 40)
    return Reply(data=data)


def seed_annotate(url: str, llm_url: str, film: tuple[int, int] = FILM_SIZE) -> None:
    """Demo data; a simulated live experiment on demo-rad; LLM ones on their own datasets: n = 10, and n = 2
    with preparation on and off."""
    from sqlmodel import Session as DB

    from pxp.running.pxp.controlled.demo import ensure_demo
    from pxp.running.pxp.live.assignment import create_live_experiment
    from pxp.storage.tables import Experiment
    from tests.factories import make_rad_images

    engine = get_engine(url)
    ensure_demo(engine)
    create_live_experiment(engine, dataset="demo-rad", name="bench-simulated")
    llm = {"machine": "openai:gpt-bench", "checker": "openai:gpt-bench", "base_url": llm_url}
    for name, n, prepare in (("bench-llm", 10, None), ("bench-prep-1", 2, 1), ("bench-prep-0", 2, 0)):
        make_rad_images(engine, name=name, per_label=4, size=film if prepare is not None else (600, 500))
        eid = create_live_experiment(engine, dataset=name, name=name, n=n, **llm)  # type: ignore[arg-type]
        if prepare is not None:
            with DB(engine) as db:
                exp = db.get(Experiment, eid)
                assert exp is not None
                exp.config = {**exp.config, "prepare": prepare}
                db.add(exp)
                db.commit()


def open_annotate(browser: Any, base: str, who: str, dataset: str) -> tuple[Any, Any, str]:
    ctx = browser.new_context(viewport=VIEW)
    page = ctx.new_page()
    page.goto(f"{base}/annotate?annotator={who}&role=Radiologist&dataset={dataset}")
    return ctx, page, str(wait_for(page, FORM_READY, {"old": None, "focus": False}, "the first reply form"))


AGREE = ("Alt+A",)  # the one chord: the machine's answer, sent as RATIFY
DISAGREE = ("Alt+5", "Alt+8", "Control+Enter")  # its prediction matches mine, its explanation does not: REFUTE


def send(page: Any, old: str, keys: tuple[str, ...] = AGREE, *,
         machine_text: bool = False) -> tuple[float, float | None, str]:
    """Answer the ready form `old` by keys, the last one sending; (Send → next form ready, Send → machine
    text, the new form)."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    _idle(page)  # counts the script runs so far, so each key's wait below waits for that key's own run
    for k in keys[:-1]:
        page.keyboard.press(k)
        _idle(page)
    t0 = time.perf_counter()
    page.keyboard.press(keys[-1])
    first = None
    if machine_text:
        wait_for(page, MACHINE_TEXT, {"old": old, "focus": True}, "the machine's text")
        first = time.perf_counter() - t0
    key = wait_for(page, FORM_READY, {"old": old, "focus": True}, "the next reply form ready")
    return time.perf_counter() - t0, first, str(key)


def case_of(key: str) -> str:
    return key.rsplit("_", 1)[0]


def bench_simulated(browser: Any, base: str, sends: int) -> None:
    ctx, page, key = open_annotate(browser, base, "bench-a", "demo-rad")
    same, new = [], []
    for i in range(sends):
        took, _, nxt = send(page, key, DISAGREE if i % 2 else AGREE)
        (same if case_of(nxt) == case_of(key) else new).append(took)
        key = nxt
    ctx.close()
    print("(a) Annotate, simulated machine, demo-rad: Send → next reply form ready and focused (Sends alternate: "
          "Alt+A, and Alt+5 Alt+8 Ctrl+Enter)")
    print(line("all Sends", same + new))
    print(line("  the case goes on", same))
    print(line("  the next case begins", new))


def bench_llm(browser: Any, base: str, sends: int) -> None:
    ctx, page, key = open_annotate(browser, base, "bench-b", "bench-llm")
    firsts, readies = [], []
    for _ in range(sends):
        took, first, key = send(page, key, DISAGREE, machine_text=True)  # REFUTE: the machine answers
        readies.append(took)
        firsts.append(first or took)
    ctx.close()
    print("(b) Annotate, LLM machine (0.8 s to first token, 40 tok/s, 300 tokens, checker 0.4 s); "
          "Alt+5 Alt+8 Ctrl+Enter (REFUTE)")
    print(line("Send → first machine text visible", firsts))
    print(line("Send → next reply form ready", readies))


def bench_prepare(browser: Any, base: str, url: str, sends: int, film: tuple[int, int] = FILM_SIZE) -> None:
    engine = get_engine(url)
    print(f"(c) a new case begins (LLM machine, n = 2: each Send ends the case; {film[0]}×{film[1]} "
          "films): Send → next case's form ready, and → its film drawn")
    for prepare in (1, 0):
        who = f"bench-c{prepare}"
        ctx, page, key = open_annotate(browser, base, who, f"bench-prep-{prepare}")
        wait_for(page, "() => { " + VIEWERS + " return viewers.some((v) => v.dataset.drawn); }", None,
                 "the first film")
        waits, films = [], []
        for _ in range(sends if prepare else max(2, sends // 2)):
            if prepare:
                ready_ahead(engine, who)
            old = page.evaluate(MARK_FILM)
            t0 = time.perf_counter()
            took, _, key = send(page, key)
            wait_for(page, FILM, old, "the next case's film")
            waits.append(took)
            films.append(time.perf_counter() - t0)
        ctx.close()
        what = " (the next case's INIT ready)" if prepare else " (off)"
        print(line(f"prepare = {prepare}{what}: form ready", waits))
        print(line(f"prepare = {prepare}{what}: film drawn", films))


def ready_ahead(engine: Any, who: str, deadline: float = 60.0) -> None:
    """Wait until the annotator holds a second open session whose INIT is stored (an expert reading the case
    gives the preparation this time)."""
    q = text("SELECT count(*) FROM session s JOIN annotator a ON a.id = s.annotator_id WHERE a.name = :who "
             "AND s.status = 'open' AND EXISTS (SELECT 1 FROM message m WHERE m.session_id = s.id)")
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        with engine.connect() as c:
            if int(c.execute(q, {"who": who}).scalar_one()) >= 2:
                return
        time.sleep(0.1)


def bench_editor(browser: Any, base: str, read_s: float, opens: int = 5) -> None:
    took = _editor_opens(browser, base, "bench-e", read_s, opens)
    at_once = _editor_opens(browser, base, "bench-e0", 0, 1)
    print(f"(e) Annotate, demo DRUG case, 1280×720: Alt+M → the molecule editor shown, Ketcher ready and pre-filled "
          f"(the first pressed {read_s:g} s after the form was ready)")
    print(f"  first open {took[0]:.2f} s; later opens " + ", ".join(f"{t:.2f}" for t in took[1:]) + " s; "
          f"the first pressed as soon as the form was ready (Ketcher still starting): {at_once[0]:.2f} s")


def _editor_opens(browser: Any, base: str, who: str, read_s: float, opens: int) -> list[float]:
    """Alt+M → the editor ready and pre-filled, `opens` times (Esc between) on the first case of `who`,
    in a new browser context (nothing cached), the first `read_s` seconds after the form was ready."""
    from tests.browser.test_browser_chem import READY, SHOWN, editor_frame, until

    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    page.goto(f"{base}/annotate?annotator={who}&role=Chemist&dataset=demo-drug")
    wait_for(page, FORM_READY, {"old": None, "focus": False}, "the first reply form")
    time.sleep(read_s)
    took = []
    for _ in range(opens):
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        _idle(page)
        t0 = time.perf_counter()
        page.keyboard.press("Alt+M")
        wait_for(page, SHOWN, None, "the editor shown")
        until(lambda: editor_frame(page) is not None, 120)
        frame = editor_frame(page)
        frame.wait_for_function(READY, timeout=120_000, polling=POLL_MS)
        until(lambda f=frame: f.evaluate("async () => !!(await window.ketcher.getSmiles())"), 120)  # pre-filled
        took.append(time.perf_counter() - t0)
        page.keyboard.press("Escape")  # the focus stays on the page: Ketcher never takes it
        wait_for(page, "() => !(" + SHOWN + ")()", None, "the editor closed")
    ctx.close()
    return took


def annotate(args: argparse.Namespace, tmp: Path) -> None:
    from playwright.sync_api import sync_playwright

    with FakeLLM(llm_reply) as llm:
        url = f"sqlite:///{tmp / 'annotate.db'}"
        seed_annotate(url, llm.openai_url, args.film)
        server = Server(url, tmp, OPENAI_API_KEY="sk-bench-not-a-key")
        try:
            with sync_playwright() as pw:
                browser = launch(pw)
                try:
                    if "a" in args.only:
                        bench_simulated(browser, server.base, args.sends)
                    if "b" in args.only:
                        bench_llm(browser, server.base, max(2, args.sends // 2))
                    if "c" in args.only:
                        bench_prepare(browser, server.base, url, max(4, args.sends // 2), args.film)
                    if "e" in args.only:
                        bench_editor(browser, server.base, args.read)
                finally:
                    browser.close()
        finally:
            server.close()


# --- (d) Analytics -----------------------------------------------------------------------------------------------

def seed_demo(url: str) -> None:
    """Demo data and a second simulated demo-rad experiment (another seed), so Compare pairs two experiments."""
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.controlled.demo import ensure_demo
    from pxp.running.pxp.controlled.runner import run_experiment
    from pxp.running.pxp.experiments import create_experiment

    engine = get_engine(url)
    ensure_demo(engine)
    cfg = RunConfig(dataset="demo-rad", split="test", machine="simulated", human="proxy", reps=3, n=10, k=3, seed=1)
    exp = create_experiment(engine, cfg, name="demo-rad-simulated-seed-1")
    run_experiment(engine, exp.id or 0)


def seed_big(tmp: Path, sessions: int) -> str:
    """Two experiments of `sessions` sessions each (R = 5) on the same instances (bench/bench_analytics.py)."""
    from bench_analytics import generate, load_sqlite

    from pxp.storage.store import make_engine, upgrade

    path = tmp / "big.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    rows, msgs, per_run = generate(sessions, 5, 16, 3, seed=7)
    other = generate(sessions, 5, 16, 3, seed=8)
    load_sqlite(path, rows, msgs, per_run, 5, 16, more=((other[0], other[1]),))
    return f"sqlite:///{path}"


PAGES: dict[str, tuple[str, str]] = {  # what the bench opens, and the text that says it is drawn
    "Table 1": ("/analytics?view=Table+1", "Reproduce this table"),
    "Compare": ("/analytics?view=Compare", "Sessions are paired by repetition and instance"),
}


def first_render(browser: Any, base: str, path: str, marker: str, context: Any = None) -> float:
    """Seconds from typing the URL to the page drawn: in a new browser profile (nothing cached), or in a new
    tab of `context` (the app's static files cached, as for anyone who opened the app before)."""
    ctx = context or browser.new_context(viewport=VIEW)
    page = ctx.new_page()
    t0 = time.perf_counter()
    page.goto(base + path, wait_until="commit")
    wait_for(page, PAGE_DONE, marker, f"{path} drawn")
    took = time.perf_counter() - t0
    page.close()
    if context is None:
        ctx.close()
    return took


def analytics(args: argparse.Namespace, tmp: Path) -> None:
    from playwright.sync_api import sync_playwright

    demo = f"sqlite:///{tmp / 'demo.db'}"
    seed_demo(demo)
    t0 = time.perf_counter()
    big = seed_big(tmp, args.sessions)
    print(f"(d) Analytics opened cold from a URL ({args.visits} visits each); "
          f"big study loaded in {time.perf_counter() - t0:.1f} s")
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            for label, url in (("demo", demo), (f"{args.sessions:,} sessions", big)):
                server = Server(url, tmp)
                try:
                    warm = browser.new_context(viewport=VIEW)
                    for name, (path, marker) in PAGES.items():
                        first = first_render(browser, server.base, path, marker)  # its data computed then
                        xs = [first_render(browser, server.base, path, marker) for _ in range(args.visits)]
                        print(line(f"{name}, {label}, new profile", xs) + f"   its first visit {first:.2f} s")
                        first_render(browser, server.base, path, marker, warm)  # the files in its cache
                        xs = [first_render(browser, server.base, path, marker, warm) for _ in range(args.visits)]
                        print(line(f"{name}, {label}, new tab", xs))
                    warm.close()
                finally:
                    server.close()
        finally:
            browser.close()


# --- (f) first start -------------------------------------------------------------------------------------------------

#: (f): seconds since `t0` (Date.now() in ms) at which the page first showed any text, and the first-start line
FIRST_TEXT = """(t0) => { const main = document.querySelector('[data-testid="stMain"]');
  return main && main.innerText.trim() ? Date.now() - t0 : null; }"""
#: the page says first start is making the demo, with a progress bar; STEP: the bar names the demo's step
SAYS = """(t0) => /First start: pxp is making/.test(document.body.innerText)
  && document.querySelector('[data-testid="stProgress"]') ? Date.now() - t0 : null"""
MAKING = """(t0) => { const t = document.body.innerText;
  return /First start: pxp is making/.test(t) && /Making .+ \\([1-4] of 4\\)/.test(t)
    && document.querySelector('[data-testid="stProgress"]') ? Date.now() - t0 : null; }"""
HOME = "(t0) => document.body.innerText.includes('Start annotating') ? Date.now() - t0 : null"


def first_start(args: argparse.Namespace, tmp: Path) -> None:
    from playwright.sync_api import sync_playwright

    runs = 3 if args.quick else 5
    print(f"(f) first start on a fresh database ({runs} runs, each a new database and server; 1280×720)")
    rows: dict[str, list[float]] = {k: [] for k in ("text", "says", "making", "home", "served", "from start")}
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            for i in range(runs):
                t_start = time.perf_counter()
                server = Server(f"sqlite:///{tmp / f'fresh-{i}.db'}", tmp, PXP_DEMO_FILMS="0")
                served = time.perf_counter() - t_start
                try:
                    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
                    page = ctx.new_page()
                    page.goto("about:blank")
                    t0 = page.evaluate("() => Date.now()")
                    asked = time.perf_counter()
                    page.goto(server.base, wait_until="commit")
                    text = wait_for(page, FIRST_TEXT, t0, "the first text") / 1000
                    says = wait_for(page, SAYS, t0, "the first-start line and its bar") / 1000
                    making = wait_for(page, MAKING, t0, "the first-start line") / 1000
                    home = wait_for(page, HOME, t0, "Home") / 1000
                    rows["text"].append(text)
                    rows["says"].append(says)
                    rows["making"].append(making)
                    rows["home"].append(home)
                    rows["served"].append(served)
                    rows["from start"].append(asked - t_start + says)
                    ctx.close()
                finally:
                    server.close()
        finally:
            browser.close()
    print(line("page asked → first text drawn", rows["text"]))
    print(line("page asked → 'First start: …' and a bar", rows["says"]))
    print(line("page asked → the bar at 'Making … (k of 4)'", rows["making"]))
    print(line("page asked → Home", rows["home"]))
    print(line("server start → it answers", rows["served"]))
    print(line("server start → 'First start: …' and a bar", rows["from start"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer Sends and visits (about three minutes)")
    ap.add_argument("--only", default="abcdef", help="sections to run, e.g. a,d")
    ap.add_argument("--sends", type=int, default=None, help="Sends in (a); (b) and (c) do fewer")
    ap.add_argument("--visits", type=int, default=None, help="cold visits per page in (d)")
    ap.add_argument("--sessions", type=int, default=10_000, help="sessions per experiment of the big study")
    ap.add_argument("--film", default="x".join(map(str, FILM_SIZE)), help="the films' size in (c), WxH")
    ap.add_argument("--read", type=float, default=3.0, help="(e): seconds between the case shown and Alt+M")
    args = ap.parse_args()
    w, h = (int(v) for v in args.film.lower().split("x"))
    args.film = (w, h)
    args.sends = args.sends or (6 if args.quick else 18)
    args.visits = args.visits or (3 if args.quick else 7)
    import pxp

    print(f"pxp from {Path(pxp.__file__).resolve().parent}")
    sections: list[tuple[str, Callable[[argparse.Namespace, Path], None]]] = [("abce", annotate), ("d", analytics),
                                                                       ("f", first_start)]
    with tempfile.TemporaryDirectory() as tmp:
        for which, run in sections:
            if set(which) & set(args.only):
                run(args, Path(tmp))
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
