"""What every `pxp` command group shares: the typer app, `--db`, the database of a command, one-line errors.

The command groups load when their command runs (`LAZY`, filled by pxp.cli.main): `pxp --help` lists
each command's name and one-line help without importing it, and nothing here imports SQLAlchemy
(docs/development.md, "Start-up").
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from pxp.protocols.settings import SettingError, check
from pxp.storage.urls import sqlite_file

if TYPE_CHECKING:
    from rich.console import Console
    from sqlalchemy import Engine

_DB_HELP = "Database URL (default: PXP_DATABASE_URL or sqlite:///pxp.db); also accepted after the command."


def hoist_db(args: list[str], command: Callable[[str], Any]) -> list[str]:
    """Move `--db URL` / `--db=URL` given after the command to the front, so
    `pxp report --db URL ...` and `pxp import csv F --db URL` work as `pxp --db URL ...`.

    Stops at `--`; a command with its own `--db` option keeps it. Two different URLs are refused.
    """
    head, rest, urls = [], list(args), []
    cmd = next((a for i, a in enumerate(rest) if not a.startswith("-")
                and (i == 0 or rest[i - 1] != "--db")), None)
    own = command(cmd) if cmd else None
    if own is not None and any("--db" in getattr(p, "opts", ()) for p in getattr(own, "params", ())):
        return args
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--":
            head += rest[i:]
            break
        if a == "--db" and i + 1 < len(rest):
            urls.append(rest[i + 1])
            i += 2
            continue
        if a.startswith("--db="):
            urls.append(a[len("--db="):])
        else:
            head.append(a)
        i += 1
    if len(set(urls)) > 1:
        raise typer.BadParameter(f"--db given twice with different URLs ({', '.join(urls)})")
    return (["--db", urls[0]] if urls else []) + head


def named_path(value: str | Path) -> Path:
    """Every file or folder a command is given (an argument, --out, --log, ...): never empty (an empty one would mean
    the current folder) and a name a file system takes, checked before the command starts (tests/cli/
    test_every_option.py walks every command to keep each path parameter on this parser)."""
    if not str(value).strip():
        raise typer.BadParameter("must name a file or folder (it was empty)")
    if len(os.fsencode(str(value))) >= 4096 or any(len(os.fsencode(p)) > 255 for p in Path(value).parts):
        raise typer.BadParameter("is longer than a file system takes (255 bytes a name, 4,096 a path)")
    return Path(value)


#: every command and group of `pxp`, in the order of its help: name -> (the module of pxp.cli that registers
#: it, its one-line help); a command is imported when it runs (tests/cli/test_startup.py keeps the lines true)
LAZY: dict[str, tuple[str, str]] = {}


class DbGroup(TyperGroup):
    """pxp's command group: `--db URL` before or after any command, a usage error (a bad option
    value, an unknown option, --db twice) as one line, like every other error, and each command
    of `LAZY` imported only when it runs."""

    _listing = False

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_db(args, lambda name: self.get_command(ctx, name)))

    def list_commands(self, ctx: Any) -> list[str]:
        return [*LAZY, *(name for name in self.commands if name not in LAZY)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        module, line = LAZY.get(cmd_name, ("", ""))
        fresh = bool(module) and f"pxp.cli.{module}" not in sys.modules
        if fresh and self._listing:  # the help's list of commands: the name and its line, nothing imported
            return TyperCommand(name=cmd_name, help=line)
        if fresh or (module and cmd_name not in self.commands):
            importlib.import_module(f"pxp.cli.{module}")  # registers its commands on `app`: built again
            self.commands.update(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except typer.TyperException as e:  # typer's click errors: usage, bad values, missing files
            if type(e).__name__ == "NoArgsIsHelpError":
                getattr(e, "show")()  # noqa: B009  (`pxp` or `pxp import` alone: the help, as before)
                sys.exit(e.exit_code)
            sys.exit(usage_line(e))
        except typer.Abort:
            err.print("aborted", highlight=False, markup=False)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def usage_line(e: typer.TyperException) -> int:
    """Print a typer (click) error as one line (what, where, what to do); its exit code."""
    text = " ".join(e.format_message().split())
    ctx = getattr(e, "ctx", None)
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    err.print(f"error: {text}{hint}", highlight=False, markup=False, emoji=False, soft_wrap=True)
    return e.exit_code


app = typer.Typer(cls=DbGroup, name="pxp", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Run the PXP intelligibility protocol and measure how intelligible it was.")
import_app = typer.Typer(help="Import transcripts, study datasets, CSV/JSONL, DICOM.",
                         no_args_is_help=True)
app.add_typer(import_app, name="import")


class _Console:
    """Rich's Console, imported when the command first prints through it (a command that prints with typer.echo,
    `pxp report`, does not load Rich: about 0.03 s; docs/development.md, "Start-up"). Text from users, files and
    providers is printed literally: no ":smile:" emoji codes."""

    _console: Console | None = None

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr

    def real(self) -> Console:
        """The Console itself (for what takes one: a progress display)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, emoji=False)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


def escape(text: str) -> str:
    """rich.markup.escape, imported when first needed."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


out = _Console()
err = _Console(stderr=True)


class CliState:
    db: str | None = None
    #: a SQLite file this command creates, and the folders it made for it (outermost first)
    created: tuple[Path, list[Path]] | None = None
    #: the creation is all-or-nothing (`pxp demo`, `pxp db init`): the command writes a temporary file beside it
    #: (`db`), renamed into place when it succeeds (docs/operations.md, Databases). Other commands make the file
    #: in place, so that a long run or import killed half-way leaves what it stored to resume from
    atomic: bool = False
    #: an existing database that was empty when the command began ("" when it was not): a failed command leaves
    #: it empty again
    emptied: str | None = None

    def engine(self, *, must_exist: bool = False, atomic: bool = False) -> Engine:
        """The database of a command that creates data (a new SQLite file is announced at the end); `atomic`: a new
        file is made whole or not at all (see `atomic`)."""
        from pxp.storage.core import get_engine
        from pxp.storage.schema import StoreError

        if must_exist:
            return self.reader()
        try:
            path = sqlite_file(self.db)
            if path is not None and not path.exists() and self.created is None:
                self.created = (path, [p for p in reversed(path.parents) if not p.exists()])
                self.atomic = atomic
                if atomic:
                    self.db = f"sqlite:///{path.with_name(f'.{path.name}.new-{os.getpid()}')}"
            elif self.created is None and self.emptied is None:
                self.emptied = self.db if _empty(self.db) else ""
            return get_engine(self.db)
        except (StoreError, SettingError) as e:
            fail(str(e))
        except OSError as e:  # a folder that cannot be made, a full disk
            where = self.created[0] if self.created else sqlite_file(self.db)
            self.finish(False)
            blocked = next((p for p in (where.parents if where else ()) if p.exists() and not p.is_dir()), None)
            why = f"{blocked} is not a folder" if blocked else e.strerror or type(e).__name__
            fail(f"{where}: the database cannot be created ({why}); choose another path")

    def where(self) -> str:
        """The command's database as a line names it: the file it creates, else its URL without a password."""
        from pxp.storage.core import make_engine
        from pxp.storage.faults import shown_database

        if self.created is not None:
            return str(self.created[0])
        path = sqlite_file(self.db)
        return str(path) if path is not None else shown_database(make_engine(self.db))

    def keep(self) -> None:
        """The database this command created, renamed into place (never over one made meanwhile) and announced."""
        if self.created is None:
            return
        path, _ = self.created
        if self.atomic:  # else made in place
            temp = sqlite_file(self.db)
            assert temp is not None
            _settle(self.db)
            try:
                os.link(temp, path)
            except OSError as e:
                self.finish(False)
                fail(f"{path}: the database cannot be created ({e.strerror or type(e).__name__}); nothing was kept")
            temp.unlink(missing_ok=True)
            self.db = f"sqlite:///{path}"
        self.created = None
        err.print(f"created database {path}", highlight=False, markup=False, soft_wrap=True)

    def finish(self, ok: bool) -> None:
        """End of a command: a database it created is kept (and said so) only when it succeeded; a failed
        command leaves nothing of it, and leaves a database that was empty empty (docs/operations.md, Databases)."""
        if ok:
            self.keep()
            return
        emptied, self.emptied = self.emptied, None
        if emptied:
            _empty_again(emptied)
        if self.created is None:
            return
        if not self.atomic and _holds_data(self.db):  # a run or import that stored something: kept to resume
            self.keep()
            return
        path, made = self.created
        self.created = None
        temp = sqlite_file(self.db)
        _settle(self.db)
        for f in (temp, temp.with_name(temp.name + "-wal"), temp.with_name(temp.name + "-shm")) if temp else ():
            with contextlib.suppress(OSError):
                f.unlink()
        self.db = f"sqlite:///{path}"  # what a fault line names: the file asked for, not the temporary one
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                break

    def reader(self) -> Engine:
        """The database of a command that only reads: it must exist (nothing is created), and a
        read-only SQLite file opens read-only. Core only: no ORM (docs/development.md, "Start-up")."""
        from pxp.storage.core import get_engine
        from pxp.storage.schema import StoreError

        try:
            return get_engine(self.db, must_exist=True, migrate=False)
        except (StoreError, SettingError) as e:
            fail(str(e))


state = CliState()


def _empty(url: str | None) -> bool:
    """Whether an existing database holds no table at all (pxp would make its tables in it)."""
    from pxp.storage.core import make_engine
    from pxp.storage.schema import schema_state

    try:
        engine = make_engine(url)
        try:
            return schema_state(engine)[0] == "empty"
        finally:
            engine.dispose()
    except Exception:  # not reachable, not a database: get_engine says why
        return False


def _holds_data(url: str | None) -> bool:
    """Whether the database holds rows of pxp's (a command that failed after storing them keeps the file)."""
    from pxp.storage.core import get_engine, holds_data

    try:
        return holds_data(get_engine(url))
    except Exception:  # cannot be read: kept, so nothing stored is lost
        return True


def _settle(url: str | None) -> None:
    """Close the command's connections to `url`, its SQLite WAL written into the file."""
    from pxp.storage.core import forget_engine

    forget_engine(url)
    path = sqlite_file(url)
    if path is not None and path.exists():
        import sqlite3

        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _empty_again(url: str) -> None:
    """A failed command's tables removed from a database that had none when it began."""
    from pxp.storage.core import make_engine
    from pxp.storage.schema import remove_tables

    _settle(url)
    with contextlib.suppress(Exception):  # the database went away: nothing more to do
        engine = make_engine(url)
        try:
            remove_tables(engine)
        finally:
            engine.dispose()


def require_settings(*groups: str) -> None:
    """At a command's start: the settings it uses (pxp.protocols.settings.USES), or one line naming the bad one."""
    try:
        check(groups)
    except SettingError as e:
        fail(str(e))


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one line and exit: the user never sees a trace."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def _command_scope() -> Iterator[None]:
    """Around every command: CliState.finish with whether the command succeeded."""
    try:
        yield
    except BaseException as e:
        state.finish(getattr(e, "exit_code", 1) == 0)
        raise
    state.finish(True)


@app.callback()
def _global(
    ctx: typer.Context,
    db: Annotated[str | None, typer.Option("--db", help=_DB_HELP)] = None,
) -> None:
    state.db = db
    state.created = state.emptied = None
    state.atomic = False
    if ctx.invoked_subcommand != "doctor":  # which shows every bad setting as ✗
        require_settings("cli")
    ctx.with_resource(_command_scope())


def dump(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def confirm_cost(usd: float | None, lines: Callable[[], list[str]], max_usd: float, yes: bool, *,
                 study: bool = False, unpriced: Sequence[str] = ()) -> None:
    """The `--max-usd` confirmation of a run or a study: ask on a terminal, else require --yes.

    An unknown cost (a model pxp has no price for) is never taken for zero: it asks too, and says why."""
    if yes or (usd is not None and usd <= max_usd):
        return
    from pxp.running.pxp.controlled.estimate_text import unknown_cost_reason

    whose = "study" + chr(39) + "s " if study else ""
    over = (f"the {whose}cost is unknown: {unknown_cost_reason(unpriced)}" if usd is None else
            f"the {whose}estimated cost is ${usd:,.2f}, over --max-usd {max_usd:g}")
    if not sys.stdin.isatty():
        fail(f"{over}; pass --yes to run it anyway (`--estimate` shows the figures)")
    err.print("\n".join(lines()), highlight=False, markup=False, soft_wrap=True)
    if not typer.confirm(f"{over}. Start the run{'s' if study else ''} anyway?", default=False, err=True):
        fail("not started")
