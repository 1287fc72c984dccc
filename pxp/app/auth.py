"""Login and roles in the app (docs/operations.md, Login and roles).

When `[auth]` is configured in Streamlit secrets, every page requires login through
`st.login` (OpenID Connect) and the team table (pxp.team.access) gives the user a role;
the router shows only the pages of that role. Without `[auth]` (local use, demos) nobody
logs in: every page is open and the Annotate page keeps its name box, with a note that
anyone can pick any name. A login ends on the server at Log out, or after the maximum login age
(pxp.team.logins): its cookie, or a copy of it, is then refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from pxp.app import resources, ui
from pxp.app.refused import role_lost
from pxp.running.pxp.live.assignment import LiveError, ensure_annotator
from pxp.storage import audit
from pxp.team.access import AccessDenied, at_least, role_for
from pxp.team.access import may as role_may
from pxp.team.access import require as role_require
from pxp.team.logins import login_refusal, max_login_hours, record_logout

S = st.session_state
#: the role of everyone when login is off (local use: the whole app is open)
LOCAL_ROLE = "admin"
OPEN_NOTE = ("Login is off: anyone can pick any name here, so the name on a session is not proof "
             "of who wrote it. Configure [auth] in the secrets to require login.")


@dataclass(frozen=True)
class User:
    """The logged-in user: the name to show, the email (the annotator's identity) and role."""

    name: str
    email: str
    role: str | None
    groups: tuple[str, ...] = ()

    @property
    def annotator_name(self) -> str:
        """The Annotator row of this user: the email, unique at the provider (display names are not)."""
        return self.email or self.name


def login_on() -> bool:
    """Whether the app requires login ([auth] in the secrets)."""
    return resources.auth_configured()


def _issued_at() -> float | None:
    """The login's issue time: the ID token's `iat` claim Streamlit keeps in its login cookie."""
    raw: Any = st.user.get("iat")
    try:
        return float(raw) if raw is not None and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        return None


def _ended() -> str | None:
    """Why the cookie's login no longer holds (logged out since, too old), or None."""
    email = str(st.user.get("email") or st.user.get("sub") or "")
    hours = max_login_hours(resources.secret("PXP_MAX_LOGIN_HOURS"))
    return login_refusal(resources.engine(), email, _issued_at(), max_hours=hours)


def log_out() -> None:
    """Log out on the server too: the login is recorded as ended, so a copy of its cookie is refused."""
    if st.user.is_logged_in:
        record_logout(resources.engine(), str(st.user.get("email") or st.user.get("sub") or ""), _issued_at())
    st.logout()


def _claims_user() -> User | None:
    if not st.user.is_logged_in:
        return None
    ended = _ended()
    if ended is not None:
        S["auth_ended"] = ended
        return None
    email = str(st.user.get("email") or "").strip().lower()
    name = str(st.user.get("name") or st.user.get("preferred_username") or email or st.user.get("sub") or "")
    raw: Any = st.user.get("groups") or ()
    groups = tuple(str(g) for g in raw) if isinstance(raw, list | tuple) else (str(raw),)
    role = role_for(resources.engine(), email or None, groups)
    return User(name=name, email=email, role=role, groups=groups)


def current_user() -> User | None:
    """The logged-in user (with the role the team table gives), or None when nobody is
    logged in or login is off."""
    return _claims_user() if login_on() else None


def current_role() -> str:
    """The role whose pages are shown: the user's, or admin when login is off (local use)."""
    if not login_on():
        return LOCAL_ROLE
    user = current_user()
    return (user.role if user is not None else None) or ""


def allowed(role: str, needed: str) -> bool:
    return at_least(role or None, needed)


def may(action: str) -> bool:
    """Whether the current user's role may do `action` (pxp.team.access.MAY; everyone without login)."""
    return role_may(current_role() or None, action)


def gate() -> User | None:
    """Stop the run unless the visitor may see the app: a login screen when nobody is
    logged in, one line when the user is not on the team. None when login is off."""
    if not login_on():
        return None
    user = current_user()
    if user is None:
        st.title("pxp")
        st.info("This pxp server requires login.", icon=":material/lock:")
        ended = S.pop("auth_ended", None) if st.user.is_logged_in else None
        if ended:
            st.warning(ui.escape_md(ended), icon=":material/logout:")
        st.button("Log in", on_click=st.login, type="primary", key="auth_login")
        st.stop()
    assert user is not None
    if user.role is None:
        who = user.email or user.name
        st.error(f"{ui.escape_md(who)} is not on this study's team: ask an admin to run "
                 f"pxp users add {ui.escape_md(who)}", icon=":material/block:")
        role_lost(user.annotator_name)  # a Send pressed meanwhile says it was not sent
        st.button("Log out", on_click=log_out, key="auth_logout_denied")
        st.stop()
    return user


def sidebar(user: User | None) -> None:
    """Who is logged in, their role and the Log out button (nothing when login is off)."""
    if user is None:
        return
    with st.sidebar:
        st.caption(f"Logged in as **{ui.escape_md(user.name)}** ({user.role})")
        st.button("Log out", on_click=log_out, key="auth_logout")


def own_sessions_only() -> str | None:
    """The annotator name whose sessions alone this user may see (below researcher), else None."""
    user = current_user()
    if user is None or allowed(user.role or "", "researcher"):
        return None
    return user.annotator_name


def actor() -> str:
    """Who is acting, for the audit trail: the logged-in user, else the name typed on Annotate."""
    user = current_user()
    if user is not None:
        return user.annotator_name
    name = " ".join(str(S.get("annotate_name") or "").split())
    return name or "anonymous (no login)"


def audited(action: str, detail: str = "") -> None:
    """Record one of the app's writes (experiment, import, settings) in the audit trail."""
    audit.record(resources.engine(), action, actor=actor(), detail=detail)


def refusal(action: str, detail: str = "") -> str | None:
    """The server-side check at one of the pages' writes (pxp.team.access.require): None if the
    current user may do `action`, else the one line why not (a "refused" audit row is written).

    Read at the write itself, not only at the page check: a fragment's rerun skips the router.
    Without login the local role (admin) may do everything.
    """
    try:
        role_require(resources.engine(), action, role=current_role() or None, actor=actor(), detail=detail)
    except AccessDenied as err:
        return str(err)
    return None


def permit(action: str, detail: str = "") -> bool:
    """`refusal`, shown: True if the current user may do `action`, else one error line and False."""
    line = refusal(action, detail)
    if line is not None:
        st.error(ui.escape_md(line), icon=":material/block:")
    return line is None


def annotator_id() -> int | None:
    """The Annotator row of the logged-in user (created on first use); None if not logged in."""
    user = current_user()
    if user is None or user.role is None:
        return None
    try:
        return ensure_annotator(resources.engine(), name=user.annotator_name, role=S.get("annotate_role", ""))
    except LiveError:
        return None


__all__ = ["LOCAL_ROLE", "OPEN_NOTE", "User", "allowed", "annotator_id", "current_role", "current_user",
           "gate", "log_out", "login_on", "may", "own_sessions_only", "permit", "refusal",
           "sidebar"]
