"""Logout is logout (docs/operations.md "Login and roles"): the server-side end of a login.

Streamlit keeps a login in a signed cookie valid for 30 days, and its Log out only deletes the
browser's copy: a copy taken before would still work. pxp records each user's logout (LoginEnd)
and refuses a login whose ID token was issued (its `iat` claim) before it, and any login older
than the maximum login age (default MAX_LOGIN_HOURS), after which the user logs in again.
"""

from __future__ import annotations

import math
import os
from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session as DB

from pxp.protocols.settings import BY_NAME, SECRET, parse, value
from pxp.storage.store import db_session
from pxp.storage.tables import LoginEnd, utcnow

MAX_LOGIN_HOURS: float = BY_NAME["PXP_MAX_LOGIN_HOURS"].default
"""Default maximum login age (hours): a clinic's working day; PXP_MAX_LOGIN_HOURS overrides it."""
CLOCK_SLACK_S = 5
"""A login issued this close before a logout (the provider's clock may differ) is judged by its
own issue time: refused only if it is the login that logged out, or older."""


def record_logout(engine: Engine, email: str, issued_at: float | None) -> None:
    """Remember that `email` logged out now, ending the login issued at `issued_at`."""
    key = email.strip().lower()
    if not key:
        return
    iat = int(issued_at) if issued_at is not None and math.isfinite(issued_at) else 0
    with db_session(engine) as db:
        row = db.get(LoginEnd, key)
        if row is None:
            db.add(LoginEnd(email=key, ended_at=utcnow(), ended_iat=iat))
        else:
            row.ended_at, row.ended_iat = utcnow(), max(iat, row.ended_iat)
            db.add(row)


def login_refusal(engine: Engine, email: str, issued_at: float | None, *, max_hours: float = MAX_LOGIN_HOURS,
                  now: datetime | None = None) -> str | None:
    """None if the login issued at `issued_at` (seconds since the epoch) still holds, else one line
    why not: it carries no issue time, it is older than `max_hours`, or the user logged out since."""
    if issued_at is None or not math.isfinite(issued_at):
        return "Your login carries no issue time, so its age is unknown: log in again."
    at = (now or utcnow()).timestamp()
    if at - issued_at > max_hours * 3600:
        return f"Your login is older than {max_hours:g} hours, the longest a login lasts here: log in again."
    with DB(engine) as db:
        row = db.get(LoginEnd, email.strip().lower())
        ended = (row.ended_at.timestamp(), row.ended_iat) if row is not None else None
    if ended is not None and (issued_at <= ended[1] or issued_at < ended[0] - CLOCK_SLACK_S):
        return "You logged out after this login was made: log in again."
    return None


def max_login_hours(secret: object = None) -> float:
    """The maximum login age: PXP_MAX_LOGIN_HOURS from the environment, else the secret of that name, else
    MAX_LOGIN_HOURS; a value its declaration does not allow raises SettingError (pxp.protocols.settings)."""
    if "PXP_MAX_LOGIN_HOURS" in os.environ:
        return float(value("PXP_MAX_LOGIN_HOURS"))
    if secret is not None:
        return float(parse(BY_NAME["PXP_MAX_LOGIN_HOURS"], secret, SECRET))
    return MAX_LOGIN_HOURS


__all__ = ["CLOCK_SLACK_S", "MAX_LOGIN_HOURS", "login_refusal", "max_login_hours", "record_logout"]
