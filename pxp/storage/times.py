"""Stored times (DESIGN §4): every one is an aware datetime in UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, in UTC: every stored time's default."""
    return datetime.now(UTC)
