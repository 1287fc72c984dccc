"""`pxp users`: the team table of the login (docs/operations.md, Login and roles): emails or groups → annotator,
researcher or admin. The first admin is added here: `pxp users add EMAIL --role admin`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pxp.cli.common import app, dump, fail, out, state

users_app = typer.Typer(help="The team: who may log in to the app, with which role.", no_args_is_help=True)
app.add_typer(users_app, name="users")

_GROUP = typer.Option("--group", help="NAME is a group claim of the login provider, not an email.")


@users_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="The email (or, with --group, the group name).")],
    role: Annotated[str | None, typer.Option(
        "--role", help="annotator, researcher or admin; a new entry without it is an annotator.")] = None,
    group: Annotated[bool, _GROUP] = False,
) -> None:
    """Add an email (or a group) with a role; an existing entry changes role only with --role."""
    from pxp.team.access import TeamError, add_member

    try:
        done = add_member(state.engine(), name, role, kind="group" if group else "email", added_by="pxp users add")
    except TeamError as e:
        fail(str(e))
    what, shown = "group" if group else "user", escape(done.name)
    if done.status == "added":
        line = f"added {what} {shown} as {done.role}"
    elif done.status == "updated":
        line = f"updated {what} {shown}: {done.before} → {done.role}"
    else:
        hint = "" if role is not None else " (give --role to change it)"
        line = f"{what} {shown} is already on the team as {done.role}; nothing changed{hint}"
    out.print(line, highlight=False, soft_wrap=True)


@users_app.command("remove")
def remove_cmd(
    name: Annotated[str, typer.Argument(help="The email (or, with --group, the group name).")],
    group: Annotated[bool, _GROUP] = False,
) -> None:
    """Take an email (or a group) off the team."""
    from pxp.team.access import TeamError, remove_member

    try:
        gone = remove_member(state.engine(), name, kind="group" if group else "email")
    except TeamError as e:
        fail(str(e))
    if gone is None:
        fail(f"{name.strip()!r} is not on the team")
    out.print(f"removed {escape(gone)}", highlight=False, soft_wrap=True)


@users_app.command("list")
def list_cmd(
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """The team, admins first."""
    from pxp.team.access import members

    if fmt not in ("table", "json"):
        fail(f"unknown format {fmt!r} (table or json)")
    rows = members(state.reader())
    if fmt == "json":
        dump([{"kind": m.kind, "name": m.name, "role": m.role, "added_by": m.added_by,
               "created_at": m.created_at.isoformat()} for m in rows])
        return
    if not rows:
        out.print("nobody yet: add the first admin with `pxp users add EMAIL --role admin`", highlight=False)
        return
    t = Table(title="The team")
    for c in ("kind", "name", "role", "added"):
        t.add_column(c)
    for m in rows:
        t.add_row(m.kind, escape(m.name), m.role, m.created_at.strftime("%Y-%m-%d %H:%M"))
    out.print(t)
