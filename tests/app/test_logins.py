"""Logout is logout (docs/operations.md "Login and roles"): the server-side end of a login, on SQLite and
PostgreSQL: a login issued before the user's logout, or older than the maximum age, is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from pxp.protocols.settings import SettingError
from pxp.storage.tables import utcnow
from pxp.team.logins import MAX_LOGIN_HOURS, login_refusal, max_login_hours, record_logout


def test_a_logout_refuses_the_logins_issued_before_it(any_engine: Engine) -> None:
    now = utcnow()
    t = now.timestamp()
    assert login_refusal(any_engine, "ann@example.org", t - 60, now=now) is None
    record_logout(any_engine, "Ann@Example.org", t - 60)
    for iat in (t - 60, t - 3600, t - 30):  # the login logged out, an older one, one from another device
        assert login_refusal(any_engine, "ann@example.org", iat) == (
            "You logged out after this login was made: log in again.")
    later = utcnow() + timedelta(seconds=2)
    assert login_refusal(any_engine, "ann@example.org", later.timestamp(), now=later) is None
    assert login_refusal(any_engine, "bob@example.org", t - 60) is None
    record_logout(any_engine, "ann@example.org", None)  # a second logout keeps the latest ended login
    assert login_refusal(any_engine, "ann@example.org", t - 60) is not None


def test_the_maximum_login_age(any_engine: Engine) -> None:
    now = utcnow()
    t = now.timestamp()
    assert login_refusal(any_engine, "a@b.c", t - MAX_LOGIN_HOURS * 3600 + 1, now=now) is None
    assert login_refusal(any_engine, "a@b.c", t - MAX_LOGIN_HOURS * 3600 - 1, now=now) == (
        "Your login is older than 12 hours, the longest a login lasts here: log in again.")
    assert login_refusal(any_engine, "a@b.c", t - 7200, max_hours=1.5, now=now) is not None
    assert "no issue time" in str(login_refusal(any_engine, "a@b.c", None))
    assert [max_login_hours(v) for v in (None, "8", "0.5", 24)] == [12.0, 8.0, 0.5, 24.0]
    for bad in ("", "-3", "abc", "nan", "0", "721"):  # refused, never silently the default (docs/operations.md)
        with pytest.raises(SettingError, match="PXP_MAX_LOGIN_HOURS"):
            max_login_hours(bad)
