"""Who may do what (docs/operations.md, Login and roles): the team's roles and the server-side session check.

Roles come from the team_member table: an email or a group claim of the login provider
mapped to annotator, researcher or admin (the highest matching role wins). The first
admin is added with `pxp users add EMAIL --role admin`. Entries are identities under the text
rule (docs/development.md "The text rule"): a look-alike of an entry is that entry. Every change
of the table runs under `_lock_team`, so the last-admin check and the write are one step.

An annotator may load and write only the sessions they hold: `check_session` is the one
place that decides it, and `submit_as` (the Annotate page's submit path) calls it on every
submission, so a forged session id, a query parameter or a stale tab cannot write into
another annotator's session. The holder is checked again inside the write's transaction (a
conditional UPDATE of the session row, which locks it until the commit), so a take-over landing
between the check and the write cannot slip through, on SQLite and PostgreSQL alike.

What a role may do beyond opening pages is in MAY (the router's NEEDS holds the pages), and
`require` is the one server-side check of it: every write of the Experiments, Datasets and Settings
pages and `create_live_as` call it at the write, so a fragment's rerun (which skips the router's page
check), a stale tab or a role lowered meanwhile cannot write. A refusal is one line and a "refused"
audit row. Without login the app passes the local role (admin): everything is allowed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import Connection, Engine, update
from sqlmodel import Session as DB
from sqlmodel import col, select

from pxp.agents.base import Answer, Facts
from pxp.protocols.errors import PxpError
from pxp.protocols.text import Identity, TextRefused, char_name, clean_name, identity, is_invisible, same_identity
from pxp.running.pxp.engine import Guard, StepRefused
from pxp.running.pxp.live.assignment import create_live_experiment
from pxp.running.pxp.live.turns import SubmitOutcome, submit_human
from pxp.storage import audit
from pxp.storage.store import db_session
from pxp.storage.tables import Session, TeamMember, utcnow

ROLES = ("annotator", "researcher", "admin")
RANK = {r: i for i, r in enumerate(ROLES)}
KINDS = ("email", "group")
#: the least role that may do each action beyond opening a page (the pages: pxp.app.router.NEEDS)
MAY = {"create experiments": "researcher", "start experiments": "researcher",
       "cancel experiments": "researcher", "import datasets": "admin", "save settings": "admin"}
_MARKUP = re.compile(r"[\[\]<>{}`\\\"]")


class AccessDenied(PxpError, PermissionError):
    """Someone tried to open or write what their role or identity does not allow."""


class TeamError(PxpError, ValueError):
    """A bad team entry (an unknown role, a malformed email)."""


@dataclass(frozen=True)
class Member:
    """One row of the team table."""

    kind: str
    name: str
    role: str
    added_by: str
    created_at: datetime


def _key(name: str, kind: str) -> Identity:
    """The stored form and skeleton: a real identity under the text rule (docs/development.md "The text
    rule"): no control, zero-width or bidi character, no markup, no word mixing scripts; an email as
    email-validator reads it (one @, a domain with a dot), lower-case, without mailto:."""
    if kind not in KINDS:
        raise TeamError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    what = "an email address" if kind == "email" else "a group name"
    hidden = next((ch for ch in name if is_invisible(ch) or unicodedata.category(ch) == "Cc"), None)
    if hidden is not None:
        raise TeamError(f"{what} may not contain {char_name(hidden)}, which no login can match; type it again")
    name = clean_name(name, what)
    markup = _MARKUP.search(name)
    if markup:
        raise TeamError(f"{name!r} contains markup or brackets ({markup.group(0)}), which {what} cannot have")
    if kind == "email":
        name = name.lower()
        if name.startswith("mailto:"):
            raise TeamError(f"{name!r}: give the address without mailto:")
        try:
            name = validate_email(name, check_deliverability=False).normalized.lower()
        except EmailNotValidError as err:
            raise TeamError(f"{name!r} is not an email address: {err}") from None
    if not name or len(name) > 320:
        raise TeamError(f"{what} must have 1 to 320 characters")
    try:
        return identity(name, what)
    except TextRefused as err:
        raise TeamError(str(err)) from None


def _lock_team(db: DB) -> None:
    """Make this transaction the only one writing the team table until it commits, so that "is someone
    else still admin?" and the write are one step: a table lock on PostgreSQL (reads go on), the
    database's write lock on SQLite (a write statement first, as BEGIN IMMEDIATE)."""
    conn = db.connection()
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("LOCK TABLE team_member IN SHARE ROW EXCLUSIVE MODE")
    else:
        conn.execute(update(TeamMember).where(col(TeamMember.id) < 0).values(role=TeamMember.role))


def _same(db: DB, key: Identity, kind: str) -> TeamMember | None:
    """The entry of this kind that is the same identity (an equal skeleton, the exact name first)."""
    rows = {r.name: r for r in db.exec(select(TeamMember).where(TeamMember.kind == kind)).all()}
    found = same_identity(key.text, rows)
    return rows[found] if found is not None else None


def _keep_an_admin(db: DB, row: TeamMember, new_role: str | None) -> None:
    """Refuse to demote or remove the last admin (the caller holds `_lock_team`)."""
    others = db.exec(select(TeamMember.id).where(TeamMember.role == "admin", col(TeamMember.id) != row.id)).all()
    if row.role == "admin" and new_role != "admin" and not others:
        raise TeamError(f"{row.name} is the last admin: add another admin first "
                        "(pxp users add EMAIL --role admin)")


def _role(role: str) -> str:
    role = role.strip().lower()
    if role not in RANK:
        raise TeamError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    return role


@dataclass(frozen=True)
class Change:
    """What `add_member` did ("added", "updated" or "unchanged"), to which stored entry, its role before and now."""

    status: str
    name: str
    before: str | None
    role: str


def add_member(engine: Engine, name: str, role: str | None = None, *, kind: str = "email",
               added_by: str = "") -> Change:
    """Give an email (or group) a role. A new entry gets `role` (annotator when None); an existing one
    changes only with a `role` given; a look-alike of an entry (an equal skeleton) is refused naming it."""
    key, wanted = _key(name, kind), (_role(role) if role is not None else None)
    with db_session(engine) as db:
        _lock_team(db)
        row = _same(db, key, kind)
        if row is None:
            db.add(TeamMember(kind=kind, name=key.text, role=wanted or "annotator", added_by=added_by[:320]))
            return Change("added", key.text, None, wanted or "annotator")
        if row.name != key.text:
            raise TeamError(f"{key.text!r} looks the same as {row.name!r}, already on the team as {row.role}: "
                            "give that one exactly")
        if wanted is None or wanted == row.role:
            return Change("unchanged", row.name, row.role, row.role)
        before = row.role
        _keep_an_admin(db, row, wanted)
        row.role = wanted
        db.add(row)
        return Change("updated", row.name, before, wanted)


def remove_member(engine: Engine, name: str, *, kind: str = "email") -> str | None:
    """Remove an email (or group) from the team, or the entry it looks the same as: its stored name,
    None if none was there."""
    key = _key(name, kind)
    with db_session(engine) as db:
        _lock_team(db)
        row = _same(db, key, kind)
        if row is None:
            return None
        _keep_an_admin(db, row, None)
        db.delete(row)
        return row.name


def members(engine: Engine) -> list[Member]:
    """The team, admins first."""
    with DB(engine) as db:
        rows = db.exec(select(TeamMember).order_by(col(TeamMember.kind), col(TeamMember.name))).all()
    out = [Member(r.kind, r.name, r.role, r.added_by, r.created_at) for r in rows]
    return sorted(out, key=lambda m: -RANK.get(m.role, -1))


def role_for(engine: Engine, email: str | None, groups: tuple[str, ...] | list[str] = ()) -> str | None:
    """The highest role the team table gives this email or any of its groups; None if none."""
    found: list[str] = []
    with DB(engine) as db:
        if email:
            found += db.exec(select(TeamMember.role).where(
                TeamMember.kind == "email", TeamMember.name == email.strip().lower())).all()
        names = [g.strip() for g in groups if isinstance(g, str) and g.strip()]
        if names:
            found += db.exec(select(TeamMember.role).where(
                TeamMember.kind == "group", col(TeamMember.name).in_(names))).all()
    known = [r for r in found if r in RANK]
    return max(known, key=RANK.__getitem__) if known else None


def at_least(role: str | None, needed: str) -> bool:
    """Whether `role` includes `needed` (admin > researcher > annotator)."""
    return role is not None and RANK.get(role, -1) >= RANK[needed]


def check_session(engine: Engine, session_id: int, annotator_id: int) -> None:
    """Raise AccessDenied unless this annotator holds the session (the one server-side check)."""
    with DB(engine) as db:
        s = db.get(Session, session_id)
        holder = s.annotator_id if s is not None else None
    if s is None:
        raise AccessDenied(f"session {session_id} does not exist")
    if holder != annotator_id:
        raise AccessDenied(f"session {session_id} belongs to another annotator")


def may_open(engine: Engine, session_id: int, annotator_id: int) -> bool:
    """Whether this annotator may load the session (the same rule as writing it)."""
    try:
        check_session(engine, session_id, annotator_id)
    except AccessDenied:
        return False
    return True


def holds(session_id: int, annotator_id: int) -> Guard:
    """The engine guard of a human step: touch the session only if this annotator holds it.

    A conditional UPDATE, first in the write's transaction: it locks the row (PostgreSQL) or the
    database (SQLite) until the commit, so a take-over either lands before it (the update finds
    another holder and nothing is written) or waits for the commit (and finds the session active).
    """
    def guard(conn: Connection) -> str | None:
        done = conn.execute(
            update(Session).where(col(Session.id) == session_id, col(Session.annotator_id) == annotator_id)
            .values(updated_at=utcnow())
        )
        return None if done.rowcount == 1 else f"session {session_id} belongs to another annotator"
    return guard


def submit_as(
    engine: Engine, session_id: int, *, annotator_id: int, j: int, answer: Answer, facts: Facts,
    view: dict[str, Any] | None = None,
) -> SubmitOutcome:
    """The human's message j, stored only if this annotator holds the session.

    Checked before the step (a clear line for an unknown or plainly foreign session) and again in
    the write's transaction (`holds`). A refusal (or a session closed meanwhile) writes nothing to the
    session and leaves a "refused" row in the audit trail.
    """
    try:
        check_session(engine, session_id, annotator_id)
        out = submit_human(engine, session_id, j=j, answer=answer, facts=facts,
                           guard=holds(session_id, annotator_id), view=view)
    except (AccessDenied, StepRefused) as err:
        out = SubmitOutcome("refused", str(err))
    if out.status in ("refused", "closed"):
        audit.record(engine, "refused", session_id=session_id, annotator_id=annotator_id, j=j,
                     detail=out.message)
    return out


def refuse_stale(engine: Engine, session_id: int, *, annotator_id: int, j: int) -> str | None:
    """A Send pressed in a tab whose case can no longer take it: None if the session is still this
    annotator's and open (nothing to refuse), else why not, in words for the annotator, after
    writing the "refused" audit row (the same row as `submit_as`; nothing is written to the session).
    """
    with DB(engine) as db:
        s = db.get(Session, session_id)
        holder, status = (s.annotator_id, s.status) if s is not None else (None, "gone")
    if holder == annotator_id and status == "open":
        return None
    why = ("the case was taken over by another annotator" if holder != annotator_id
           else f"the case is {status}")
    audit.record(engine, "refused", session_id=session_id, annotator_id=annotator_id, j=j,
                 detail=f"a stale tab's reply: {why}")
    return why


def may(role: str | None, action: str) -> bool:
    """Whether `role` may do `action` (a key of MAY)."""
    return at_least(role, MAY[action])


def require(engine: Engine, action: str, *, role: str | None, actor: str, detail: str = "") -> None:
    """The one server-side role check of a write (docs/operations.md, Login and roles): return if `role` may do `action`
    (MAY), else write a "refused" audit row naming the actor and raise AccessDenied (one line)."""
    if may(role, action):
        return
    whom = "an admin" if MAY[action] == "admin" else "a researcher or an admin"
    audit.record(engine, "refused", actor=actor, detail=f"{action}: {detail}" if detail else action)
    raise AccessDenied(f"Your role ({role or 'none'}) may not {action}: ask {whom}.")


def create_live_as(engine: Engine, *, role: str | None, actor: str, dataset: str, **config: Any) -> int:
    """A live experiment created by `actor` with `role` (pxp.running.pxp.live.assignment.create_live_experiment).

    Refused by `require` (AccessDenied, one line, an audit "refused" row, nothing stored) below
    researcher; a creation leaves a "created" row naming the actor.
    """
    require(engine, "create experiments", role=role, actor=actor, detail=f"a live experiment on {dataset}")
    eid = create_live_experiment(engine, dataset=dataset, **config)
    audit.record(engine, "created", actor=actor, detail=f"live experiment {eid} on {dataset}")
    return eid


__all__ = [
    "KINDS",
    "MAY",
    "RANK",
    "ROLES",
    "AccessDenied",
    "Change",
    "Member",
    "TeamError",
    "add_member",
    "at_least",
    "check_session",
    "create_live_as",
    "holds",
    "may",
    "may_open",
    "members",
    "refuse_stale",
    "remove_member",
    "require",
    "role_for",
    "submit_as",
]
