"""The `pxp` command line (typer): one module per command group, registered here (DESIGN §8) by name and
one-line help, and imported when its command runs (pxp.cli.common.LAZY).

`--db URL` before or after any command; errors are one clear line (pxp.errors.user_message).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pxp.cli.common import LAZY, app, err, escape
from pxp.errors import user_message
from pxp.protocols.settings import SettingError
from pxp.protocols.settings import value as setting
from pxp.storage.faults import is_database_error

LAZY.update({
    "models": ("llm", "The models a server offers (its /v1/models), one per line (docs/research.md, Local models)."),
    "calls": ("llm", "LLM calls of an experiment per run: calls, errors, tokens, cache, cost, latency."),
    "report": ("analysis", "Print the papers' Table 1 for an experiment (or several side by side)."),
    "validate": ("analysis", "Check every stored session against the protocol (docs/protocol.md); exit 1 listing "
                 "each violation."),
    "demo": ("data", "Load the demo datasets made by pxp and a finished simulated experiment on each."),
    "export": ("export", "Export an experiment's D, M and C tables, evaluations, calls and probes into directory "
                         "--out."),
    "run": ("runs", "Run a controlled experiment: INTERACT over R concurrent repetitions, LEARN, machine "
                    "performance."),
    "app": ("app", "Start the pxp web app (extra options, e.g. --server.address 0.0.0.0, go to streamlit run)."),
    "doctor": ("app", "Check what the app and the runs need, one line each (✓ or ✗ with what to do); exit 1 on any ✗."),
    "worker": ("worker", "Process repetitions queued by `pxp run --distributed` (PostgreSQL only) until stopped."),
    "import": ("data", "Import transcripts, study datasets, CSV/JSONL, DICOM."),
    "task": ("llm", "Custom tasks: check a TOML/JSON task config, attach it to a dataset."),
    "db": ("db", "The database: create or upgrade pxp's tables."),
    "scorekeeping": ("scorekeeping", "The scorekeeping game (private and shared): instances, runs, clembench results, "
                                     "report."),
    "users": ("users", "The team: who may log in to the app, with which role."),
})


def quiet_drivers() -> None:
    """No driver's own warnings on stderr: psycopg and SQLAlchemy log a lost connection's object reprs
    (with Python's last-resort handler), and a connection collected after a fault reports through
    the unraisable hook; the fault reaches the user as one line of pxp's instead."""
    import logging

    for name in ("psycopg", "psycopg.pool", "sqlalchemy"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    # a provider's in-flight limit halved after a 429 is for `pxp worker` and the server's log; a command's
    # user reads its outcome lines (a pause names the 429 already)
    logging.getLogger("pxp.llm.limits").setLevel(logging.ERROR)
    default = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_value is not None and is_database_error(unraisable.exc_value):
            return
        default(unraisable)

    sys.unraisablehook = hook


#: the annotations whose values typer gets from the command line as they are: a str, a list of str, a bool flag
PLAIN: dict[Any, type] = {str: str, list[str]: str, bool: bool}


def plain_options() -> None:
    """Take a str, list[str] or bool option's value as it is when it already is one, and a parser's value as the
    parser gives it (docs/development.md, "Start-up"): typer 0.26 and later coerce every value through a pydantic
    TypeAdapter, built per option, which costs each command about 0.1 s. Any other value or annotation, a value
    its parser refuses (parsed again by typer, for typer's own error), a list or tuple and choices still go through
    typer's own coercion; a typer without these internals is left as it is."""
    try:
        import typer.core as core
        from typer._coercion import RuntimeParam
    except ImportError:
        return
    found: Callable[[Any], Any] | None = getattr(core, "build_runtime_param", None)
    if found is None or getattr(found, "plain", False):
        return
    typers: Callable[[Any], Any] = found

    @dataclass(frozen=True)
    class Plain(RuntimeParam):  # type: ignore[misc]
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = PLAIN[self.annotation]
            if isinstance(value, kind):
                return value
            if isinstance(value, list | tuple) and all(isinstance(v, kind) for v in value):
                return list(value)
            return typers(self.descriptor)._coerce_value(value, param=param, ctx=ctx)  # as typer would

    @dataclass(frozen=True)
    class Parsed(RuntimeParam):  # type: ignore[misc]
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            parse = self.parameter_info.parser
            assert parse is not None  # build() makes a Parsed only for an option with a parser
            try:
                return parse(value)  # what typer's adapter returns: the parser's value
            except Exception:  # refused: typer parses it again and words the error its own way
                return typers(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        parser = descriptor.parameter_info.parser
        args = {"parameter_info": descriptor.parameter_info, "annotation": descriptor.annotation,
                "descriptor": descriptor}
        if descriptor.file_annotation is not None or descriptor.is_choice:
            return typers(descriptor)
        if parser is None and descriptor.annotation in PLAIN:
            return Plain(**args)
        if parser is not None and not descriptor.is_list and not descriptor.is_tuple:
            return Parsed(**args)
        return typers(descriptor)

    build.plain = True  # type: ignore[attr-defined]
    setattr(core, "build_runtime_param", build)  # noqa: B010  (typer calls it by this name: typer.core)


plain_options()


def _debug() -> bool:
    """PXP_DEBUG (a bad value is refused at the command's start: pxp.cli.common.require_settings)."""
    try:
        return bool(setting("PXP_DEBUG"))
    except SettingError:
        return False


def main() -> None:
    """Entry point: run the app; any unexpected error becomes one line (PXP_DEBUG=1 for a trace)."""
    debug = _debug()
    if not debug:
        quiet_drivers()
    try:
        app()
    except SystemExit:
        raise
    except Exception as e:
        if debug:
            raise
        from pxp.cli.common import state
        from pxp.storage.faults import shown_database

        line = user_message(e, shown_database(state.db) if is_database_error(e) else None)
        err.print(f"[red]error:[/red] {escape(line)}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
