"""The app in a real browser, as a hospital network sees it (docs/operations.md, Install).

On a freshly started server the first visitor opens a page URL directly and gets pxp's
navigation (the pages live in pxp/app/views/, which Streamlit does not auto-discover),
and while every page is visited, and the Annotate page with the X-ray viewer (RAD) and with the
molecule editor open (DRUG), the browser contacts no host but the app's own origin.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from pxp.app.router import PAGES
from tests.browser.test_browser_app import _annotate_as, _idle, _pick_dataset, launch, server  # noqa: F401  (server is a fixture)
from tests.browser.test_browser_chem import KETCHER_URL, open_editor

pytestmark = pytest.mark.browser


def test_first_direct_page_load_has_pxp_navigation_and_no_external_request(server: tuple[str, str]) -> None:  # noqa: F811
    from playwright.sync_api import sync_playwright

    base, _ = server
    origin = urlsplit(base).netloc
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("request", lambda r: requests.append(r.url))
            # the very first visit of this server goes straight to a page URL
            page.goto(f"{base}/analytics")
            page.get_by_test_id("stSidebarNav").wait_for(timeout=60000)
            _idle(page)
            nav = page.get_by_test_id("stSidebarNav").inner_text()
            titles = [title for _, title, _ in PAGES]
            for title in titles:
                assert title in nav, nav
            assert "streamlit app" not in nav.lower() and "analytics\n" not in nav + "\n", nav
            page.locator("h1", has_text="Analytics").first.wait_for(timeout=60000)
            for name, title, _ in PAGES:
                path = "" if name == "home.py" else name.removesuffix(".py")
                page.goto(f"{base}/{path}")
                heading = "PXP" if name == "home.py" else title
                page.locator("h1", has_text=heading).first.wait_for(timeout=60000)
                _idle(page)
                assert not page.get_by_test_id("stException").count(), title
            # the Annotate page with the X-ray viewer (RAD) and with the molecule editor open (DRUG)
            _annotate_as(page, base, "Dr Origin", "demo-rad (rad)")
            page.locator("[data-pxp-viewer][data-drawn]").first.wait_for(timeout=90000)
            _idle(page)
            _pick_dataset(page, "demo-drug (drug)")
            page.get_by_text("The machine's proposed step", exact=False).first.wait_for(timeout=90000)
            _idle(page)
            open_editor(page)  # by its key chord (Ketcher was loaded in the background, from the app's server)
            assert [u for u in requests if KETCHER_URL in u]
        finally:
            browser.close()
    assert requests
    external = sorted({u for u in requests
                       if urlsplit(u).scheme in ("http", "https", "ws", "wss") and urlsplit(u).netloc != origin})
    assert not external, external
