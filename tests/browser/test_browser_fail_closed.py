"""Fail closed in a real browser (docs/operations.md, Troubleshooting; Login and roles): a malformed secrets
file serves no page but its error line, and the Analytics downloads reach only the logged-in session (no
media URL a copied link or a client without the cookie could fetch)."""

from __future__ import annotations

import io
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from pxp.running.pxp.controlled.demo import ensure_demo
from pxp.storage.store import get_engine
from tests.browser.test_browser_app import CHROMIUM, _idle, _stop, app_page, launch
from tests.browser.test_browser_auth import RITA, _log_in, _log_out, provider, start_with_login  # noqa: F401

pytestmark = pytest.mark.browser


def _need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")


def test_a_malformed_secrets_file_serves_only_its_error(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    _need_chromium()
    home = tmp_path / "home"
    (home / ".streamlit").mkdir(parents=True)
    secrets = home / ".streamlit" / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://127.0.0.1/oauth2callback\ncookie_secret = "c"\n')
    url = f"sqlite:///{tmp_path / 'app.db'}"
    get_engine(url)
    env = {**os.environ, "PXP_DATABASE_URL": url, "HOME": str(home)}
    with app_page(env, tmp_path) as (page, base):
        for path in ("", "/annotate", "/sessions", "/experiments", "/datasets", "/settings", "/audit"):
            page.goto(base + path)
            expect(page.get_by_text(f"{secrets}:2: not valid TOML")).to_be_visible(timeout=90_000)
            _idle(page)
            expect(page.get_by_test_id("stSidebarNav")).to_have_count(0)
            expect(page.get_by_role("heading")).to_have_count(0)
            assert page.get_by_role("button").count() == 0 or "Annotate" not in page.content()


def test_downloads_reach_only_the_logged_in_session(tmp_path: Path, provider: str) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    _need_chromium()
    from pxp.team.access import add_member

    url = f"sqlite:///{tmp_path / 'auth.db'}"
    engine = get_engine(url)
    ensure_demo(engine)
    add_member(engine, RITA[0], "researcher")
    proc, base, log = start_with_login(tmp_path, provider, url)
    media: list[str] = []
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            try:
                context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
                page = context.new_page()
                page.on("request", lambda r: media.append(r.url) if "/media/" in r.url and "/static/" not in r.url
                        else None)
                _log_in(page, base, RITA[0])
                page.goto(f"{base}/analytics")
                _idle(page)
                expect(page.get_by_role("heading", name="Analytics").first).to_be_visible(timeout=90_000)
                buttons = page.locator("[data-pxp-download]")
                expect(buttons.first).to_be_visible(timeout=90_000)
                table = page.locator("[data-pxp-download]", has_text="Table (CSV)")
                with page.expect_download(timeout=60_000) as got:
                    table.click()
                saved: Any = got.value
                assert saved.suggested_filename == "table1.csv"
                text = Path(saved.path()).read_text()
                assert text.splitlines()[0].startswith("experiment,property,label,"), text[:200]
                # a button shows its label alone: no icon glyph that the app's fonts lack (an empty box)
                labels = buttons.evaluate_all("els => els.map(e => e.textContent)")
                assert labels and all(t.isascii() and t.isprintable() for t in labels), labels
                assert table.inner_text() == "Table (CSV)"
                hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
                assert not [h for h in hrefs if "/media/" in h], hrefs
                # nothing of the page travelled as a media URL but the tab's icon (drawn by pxp, 64 px)
                for link in set(media):
                    with urllib.request.urlopen(link, timeout=5) as r:
                        assert Image.open(io.BytesIO(r.read())).size == (64, 64), link
                _log_out(page, base)
            finally:
                browser.close()
        # and a client without the login finds nothing: the server has no such files to serve
        for probe in ("/media/", "/media/table1.csv"):
            try:
                with urllib.request.urlopen(base + probe, timeout=5) as r:
                    assert r.status != 200 or not r.read(), probe
            except OSError:
                pass
    finally:
        _stop(proc)
        log.close()
