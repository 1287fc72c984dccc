"""Benchmark: every Analytics view, Sessions and Experiments on a study of a real study's size, in a real browser
(docs/development.md, Benchmarks; docs/research.md, Analytics).

The study is built as a user builds one: `pxp import transcripts` of realistic sessions (3-10 messages each,
explanations of about 300 characters: bench/bench_import.py's `write_realistic`), imported twice as two
experiments on the same cases so Compare pairs them. A real `streamlit run` serves it (the browser tests'
launcher); Debian's chromium opens each page. Prints, per view:

- first: the view opened from its URL in a new browser session just after the server started (its data computed
  then, or by the background warming the server started as it started: pxp.app.server, pxp.analysis.warm);
- warmed: the same on a new server once its warming is over (started with the server, no page opened before;
  over when the server's CPU time stops growing), what a visitor finds a few seconds after the server started;
- again: the same URL in another new session (the data cached by data version);
- returning: the same URL in a new tab of a browser that has opened the app before, so its cache holds the app's
  scripts (a new Streamlit session all the same): what a user who has used pxp before waits for;
- switch: in one session, the view chosen from the view picker after another view (a later interaction);
- the server's resident memory after the view (VmRSS) and its peak so far (VmHWM), from /proc;
- beside first and warmed, the server's CPU time during the visit (/proc: the browser's is not counted).

    python bench/bench_pages.py [--sessions 100000] [--db sqlite|postgresql] [--visits 3]
        [--study URL]   # a study built before (two experiments), instead of importing one
    PXP_WARM=0 python bench/bench_pages.py ...   # the same without the background warming

Figures only; a loaded machine slows everything (2 cores here).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import checkout  # this checkout on the import path (first)
from bench_browser import VIEW, Server
from bench_import import proc_cpu, write_realistic

from tests.browser.test_browser_app import _idle, launch

#: the Analytics views (pxp.app.views.analytics_common.VIEWS), then the other pages a researcher opens
PAGES = [*(f"/analytics?view={v.replace(' ', '+')}" for v in (
    "Table 1", "Figure 1", "Figure 2", "Transitions", "Session lengths", "Labels", "Annotators", "LLM cost",
    "Per-session flags", "Compare", "Common ground")), "/sessions", "/experiments"]
#: a page is drawn: a script run is over, nothing waits (spinner, skeleton), every table in view has drawn its
#: canvas and every chart its plot
DRAWN = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (!document.querySelector('h1')) return false;
  if (document.querySelector('[data-testid="stSpinner"], [data-testid="stSkeleton"]')) return false;
  if ([...document.querySelectorAll('[data-testid="stDataFrame"]')]
      .some((d) => d.checkVisibility() && !d.closest('details:not([open])') && !d.querySelector('canvas')))
    return false;
  if ([...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
      .some((c) => c.checkVisibility() && !c.querySelector('svg.marks, canvas.marks')))
    return false;
  return document.fonts.status === 'loaded';
}"""


def memory(pid: int) -> tuple[float, float]:
    """The server's resident memory now and its peak (MiB), summed over its process tree's main process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def quiet(pid: int, window: float = 3.0, busy: float = 0.1, limit: float = 600.0) -> tuple[float, float]:
    """Wait until the server's CPU time grows by less than `busy` s in `window` s (its background warming over):
    (wall seconds, server CPU seconds) until then, the quiet window not counted."""
    t0, c0 = time.perf_counter(), proc_cpu(pid)
    last_t, last_c = t0, c0
    while time.perf_counter() - t0 < limit:
        time.sleep(window)
        now_t, now_c = time.perf_counter(), proc_cpu(pid)
        if now_c - last_c < busy:
            return last_t - t0, last_c - c0
        last_t, last_c = now_t, now_c
    return float("nan"), float("nan")


def build(url: str, tmp: Path, sessions: int) -> None:
    """The study, imported through `pxp import transcripts` twice (two experiments on the same cases)."""
    path, messages = write_realistic(tmp, sessions)
    env = checkout.child_env()
    t0 = time.perf_counter()
    for name in ("study-a", "study-b"):
        subprocess.run([sys.executable, "-m", "pxp.cli.main", "--db", url, "import", "transcripts", str(path),
                        "--name", name, "--task", "text"], check=True, env=env, stdout=subprocess.DEVNULL)
    print(f"study: 2 × {sessions:,} sessions ({messages:,} messages each) imported in "
          f"{time.perf_counter() - t0:.1f} s")


def drawn_in(page: Any, url: str) -> float:
    """Seconds from typing `url` in `page` to the page drawn."""
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_function(DRAWN, timeout=120_000, polling=25)
    return time.perf_counter() - t0


def opened(browser: Any, base: str, path: str) -> float:
    """Seconds from typing the URL in a new browser session to the page drawn."""
    ctx = browser.new_context(viewport=VIEW)
    took = drawn_in(ctx.new_page(), base + path)
    ctx.close()
    return took


def returning(ctx: Any, base: str, path: str) -> float:
    """Seconds from typing the URL in a new tab of `ctx` (a browser whose cache holds the app's scripts) to the
    page drawn."""
    page = ctx.new_page()
    took = drawn_in(page, base + path)
    page.close()
    return took


def firsts(browser: Any, server: Server) -> dict[str, tuple[float, float]]:
    """Each page's first visit: (seconds, the server's CPU seconds meanwhile)."""
    out = {}
    for p in PAGES:
        c0 = proc_cpu(server.proc.pid)
        took = opened(browser, server.base, p)
        out[p] = (took, proc_cpu(server.proc.pid) - c0)
    return out


def switched(page: Any, view: str) -> float:
    """Seconds from choosing `view` in the view picker to it drawn."""
    t0 = time.perf_counter()
    page.get_by_role("radiogroup", name="View").get_by_text(view, exact=True).click()
    _idle(page)
    page.wait_for_function(DRAWN, timeout=120_000, polling=25)
    return time.perf_counter() - t0


def database(kind: str, tmp: Path) -> tuple[str, Any]:
    if kind == "sqlite":
        return f"sqlite:///{tmp / 'study.db'}", None
    from sqlalchemy import create_engine, text

    admin_url = os.environ.get("PXP_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"pxp_pages_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    return admin.url.set(database=name).render_as_string(hide_password=False), (admin, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100_000, help="sessions per experiment (two experiments)")
    ap.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--visits", type=int, default=3, help="new sessions per page after its first")
    ap.add_argument("--study", default=None, help="the database of a study built before (not imported again)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    from sqlalchemy import text

    import pxp

    print(f"pxp from {Path(pxp.__file__).resolve().parent}; {args.db}")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        url, admin = (args.study, None) if args.study else database(args.db, tmp)
        try:
            if not args.study:
                build(url, tmp, args.sessions)
            with sync_playwright() as pw:
                browser = launch(pw)
                server = Server(url, tmp)
                try:
                    first = firsts(browser, server)
                finally:
                    server.close()
                server = Server(url, tmp)
                try:
                    took, used = quiet(server.proc.pid)  # the server opened the database and warms as it starts
                    rss, peak = memory(server.proc.pid)
                    print(f"warming over {took:.1f} s after the server answered, {used:.1f} s of server CPU; "
                          f"server {rss:.0f} MiB, peak {peak:.0f} MiB; load {os.getloadavg()[0]:.2f}")
                    warmed = firsts(browser, server)
                    again = {p: min(opened(browser, server.base, p) for _ in range(args.visits)) for p in PAGES}
                    ctx = browser.new_context(viewport=VIEW)
                    for p in PAGES:  # the browser's cache gets every script the app's pages load
                        returning(ctx, server.base, p)
                    back = {p: min(returning(ctx, server.base, p) for _ in range(args.visits)) for p in PAGES}
                    page = ctx.new_page()
                    page.goto(server.base + PAGES[0])
                    page.wait_for_function(DRAWN, timeout=120_000, polling=25)
                    print(f"{'page':<36} {'first':>7} {'CPU':>6} {'warmed':>7} {'CPU':>6} {'again':>7} "
                          f"{'return':>7} {'switch':>7} {'RSS':>8} {'peak':>8}")
                    for p in PAGES:
                        view = p.split("view=")[1].replace("+", " ") if "view=" in p else None
                        switch = switched(page, view) if view and p != PAGES[0] else float("nan")
                        rss, peak = memory(server.proc.pid)
                        print(f"{p:<36} {first[p][0]:>6.2f}s {first[p][1]:>5.2f}s {warmed[p][0]:>6.2f}s "
                              f"{warmed[p][1]:>5.2f}s {again[p]:>6.2f}s {back[p]:>6.2f}s {switch:>6.2f}s "
                              f"{rss:>5.0f} MiB {peak:>4.0f} MiB")
                finally:
                    server.close()
                browser.close()
        finally:
            if admin is not None:
                engine, db = admin
                with engine.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
