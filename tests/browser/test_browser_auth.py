"""Login and roles in a real browser (docs/operations.md, Login and roles): `streamlit run` with `[auth]` in its
secrets,
a local OpenID Connect provider (oidc-provider-mock) started by the test, Debian's chromium.

Two users, two roles: the annotator logs in, sees their name, has no Analytics in the navigation,
is refused Analytics by URL and a forged `?session=` of another annotator's session, logs out;
the researcher logs in and opens both.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
from pxp.storage.audit import audit_events
from pxp.storage.store import get_engine
from pxp.storage.tables import Annotator, Session
from pxp.team.access import add_member
from tests.browser.axe import audit
from tests.browser.test_browser_app import CHROMIUM, _free_port, _idle, _start_streamlit, _stop, launch
from tests.factories import make_rad

pytestmark = pytest.mark.browser

ANN = ("ann@example.org", "Ann Annotator")
RITA = ("rita@example.org", "Rita Researcher")


@pytest.fixture
def provider() -> Iterator[str]:
    """The OIDC provider: two predefined users with name and email claims."""
    from oidc_provider_mock import User, run_server_in_thread

    users = [User(sub=email, claims={"email": email, "name": name}) for email, name in (ANN, RITA)]
    with run_server_in_thread(port=0, user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture
def auth_server(tmp_path: Path, provider: str) -> Iterator[tuple[str, int, str]]:
    """(app URL, id of a session held by another annotator, database URL) with login on."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{CHROMIUM} is required in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    url = f"sqlite:///{tmp_path / 'auth.db'}"
    engine = get_engine(url)
    from pxp.running.pxp.controlled.demo import ensure_demo

    ensure_demo(engine)
    make_rad(engine, name="toy-rad")
    add_member(engine, ANN[0], "annotator")
    add_member(engine, RITA[0], "researcher")
    create_live_experiment(engine, dataset="demo-rad", name="live-demo")  # annotators do not create experiments
    eid = create_live_experiment(engine, dataset="toy-rad", name="live-team")
    other = ensure_annotator(engine, name="other@example.org")
    sid = claim_next(engine, experiment_id=eid, annotator_id=other)
    assert sid is not None
    proc, base, log = start_with_login(tmp_path, provider, url)
    try:
        yield base, sid, url
    finally:
        _stop(proc)
        log.close()


def start_with_login(tmp_path: Path, provider: str, url: str) -> tuple[Any, str, Any]:
    """`streamlit run` on database `url` with `[auth]` pointing at the OIDC `provider`: (process,
    base URL, its log). Streamlit reads ~/.streamlit/secrets.toml, so HOME is the test's own."""
    home = tmp_path / "home"
    (home / ".streamlit").mkdir(parents=True)
    cookie = secrets.token_hex(16)

    def pick() -> int:
        port = _free_port()
        (home / ".streamlit" / "secrets.toml").write_text(
            "[auth]\n"
            f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
            f'cookie_secret = "{cookie}"\n'
            'client_id = "pxp-test"\n'
            'client_secret = "pxp-test-secret"\n'
            f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n'
        )
        return port

    env = {**os.environ, "PXP_DATABASE_URL": url, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
           "HOME": str(home)}
    return _start_streamlit(env, tmp_path, pick=pick)


def _log_in(page: Any, base: str, email: str) -> None:
    from playwright.sync_api import expect

    page.goto(base)
    expect(page.get_by_text("This pxp server requires login.")).to_be_visible(timeout=90_000)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("button", name=email).click()  # the provider's predefined user
    page.wait_for_url(f"{base}/**", timeout=90_000)
    _idle(page)


def _log_out(page: Any, base: str) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    page.get_by_role("button", name="Log out").click()
    end = page.get_by_role("button", name="End session")  # the provider's logout confirmation
    with contextlib.suppress(PlaywrightTimeout):  # a provider without end_session: straight back
        end.wait_for(timeout=60_000)
        end.click()
    page.goto(base)
    expect(page.get_by_text("This pxp server requires login.")).to_be_visible(timeout=90_000)


def test_two_users_two_roles(auth_server: tuple[str, int, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, other_sid, url = auth_server
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # before login: no page, only the login screen
            page.goto(f"{base}/analytics")
            expect(page.get_by_text("This pxp server requires login.")).to_be_visible(timeout=90_000)
            expect(page.get_by_role("heading", name="Analytics")).to_have_count(0)
            found = audit(page, "the login screen")  # (docs/accessibility.md; the other pages: test_browser_a11y)

            # the annotator
            _log_in(page, base, ANN[0])
            expect(page.get_by_text(f"Logged in as {ANN[1]} (annotator)")).to_be_visible(timeout=90_000)
            nav = page.get_by_test_id("stSidebarNav")
            expect(nav.get_by_text("Annotate")).to_be_visible()
            for hidden in ("Analytics", "Experiments", "Datasets", "Settings", "Audit"):
                expect(nav.get_by_text(hidden, exact=True)).to_have_count(0)
            page.goto(f"{base}/analytics")
            _idle(page)
            expect(page.get_by_text("Your role (annotator) may not open the Analytics page.")).to_be_visible(
                timeout=90_000)
            found += audit(page, "a refused page")  # a page the role may not open, the sidebar with who is logged in
            expect(page.get_by_role("heading", name="Analytics")).to_have_count(0)
            page.goto(f"{base}/sessions?session={other_sid}")
            _idle(page)
            expect(page.get_by_text(f"You may not open session '{other_sid}': it is not one of yours.")
                   ).to_be_visible(timeout=90_000)
            expect(page.get_by_text(f"Session {other_sid} ·")).to_have_count(0)
            page.goto(f"{base}/annotate")
            _idle(page)
            expect(page.get_by_text("Annotating as ann@")).to_be_visible(timeout=90_000)  # @ + word joiner
            expect(page.get_by_label("Your name")).to_have_count(0)
            # a reply (RATIFY) is stored in a session the login holds, and audited as hers
            expect(page.get_by_text("The machine now says")).to_be_visible(timeout=90_000)
            for button in ("Yes Shortcut Alt + 5", "Yes Shortcut Alt + 7", "Send Shortcut Ctrl + Enter"):
                page.get_by_role("button", name=button).click()
                _idle(page)
            expect(page.get_by_text("is finished: both agents ratified")).to_be_visible(timeout=90_000)
            engine = get_engine(url)
            trail = [(e.actor, e.action, e.j) for e in reversed(audit_events(engine))]
            assert (ANN[0], "opened", None) in trail and (ANN[0], "answered", 2) in trail, trail
            with DB(engine) as db:
                me = db.exec(select(Annotator).where(Annotator.name == ANN[0])).one()
                mine = db.exec(select(Session).where(Session.annotator_id == me.id)).all()
                statuses = [s.status for s in mine]
                # the case on screen, and the next one once it is prepared in the background (one ahead)
                assert statuses[0] == "finished" and statuses[1:] in (["open"], ["open", "open"]), statuses
            _log_out(page, base)

            # the researcher
            _log_in(page, base, RITA[0])
            expect(page.get_by_text(f"Logged in as {RITA[1]} (researcher)")).to_be_visible(timeout=90_000)
            nav = page.get_by_test_id("stSidebarNav")
            expect(nav.get_by_text("Analytics", exact=True)).to_be_visible()
            expect(nav.get_by_text("Settings", exact=True)).to_have_count(0)
            page.goto(f"{base}/analytics")
            _idle(page)
            expect(page.get_by_role("heading", name="Analytics").first).to_be_visible(timeout=90_000)
            page.goto(f"{base}/sessions?session={other_sid}")
            _idle(page)
            expect(page.get_by_text(f"Session {other_sid} ·")).to_be_visible(timeout=90_000)
            page.goto(f"{base}/settings")
            _idle(page)
            expect(page.get_by_text("Your role (researcher) may not open the Settings page.")).to_be_visible(
                timeout=90_000)
            assert found == [], "\n".join(found)
        finally:
            browser.close()
