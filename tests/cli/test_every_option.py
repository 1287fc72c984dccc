"""Every option of every command, given a value no one means (docs/operations.md, "Settings and options"): an
empty value, a blank one, a negative number, a name longer than any file system takes. Each is refused or used,
never a Python exception: the command ends with its exit code (0, 1 or 2), every line it prints to stderr is a
message of its own ("error: …", or a usage box for exit 2), no trace and no "[Errno n]" reach the user, and an
empty or blank value is never taken silently. Walked from the command tree itself, so a new option is covered.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import pxp.cli.main  # noqa: F401  (registers every command group)
from pxp.cli.common import LAZY, app
from pxp.errors import user_message

#: values no one means, and whether the command must refuse it
BAD = {"": True, " ": True, "-1": False, "x" * 5000: False}
#: commands that serve or wait until stopped, not checked here (their options: tests/cli/test_fail_closed_config.py,
#: tests/running/)
SERVING = {("app",), ("worker",)}
cli = CliRunner()


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    for module in {m for m, _ in LAZY.values()}:
        importlib.import_module(f"pxp.cli.{module}")
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        if hasattr(cmd, "list_commands"):
            ctx = type(root).context_class(cmd)
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), (*path, name))
        elif path not in SERVING:
            yield path, cmd

    yield from walk(root, ())


COMMANDS = dict(_commands())


def test_every_path_a_command_is_given_is_checked_by_one_parser() -> None:
    """A file or folder parameter goes through pxp.cli.common.named_path (not empty, a name a file system takes)."""
    from pxp.cli.common import named_path

    loose = [f"{' '.join(path)} {p.name}" for path, cmd in COMMANDS.items() for p in cmd.params
             if p.type_descriptor.annotation is Path and p.type_descriptor.parameter_info.parser is not named_path]
    assert COMMANDS and loose == []


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_option_refuses_or_takes_a_value_no_one_means_in_a_line(path: tuple[str, ...], tmp_path: Path) -> None:
    cmd = COMMANDS[path]
    db = f"sqlite:///{tmp_path / 'pxp.db'}"
    assert cli.invoke(app, ["--db", db, "db", "init"]).exit_code == 0  # made once, not by each refused command
    needed = ["missing-thing" for p in cmd.params if type(p).__name__.endswith("Argument") and p.required]
    options = [p for p in cmd.params if type(p).__name__.endswith("Option") and not getattr(p, "is_flag", False)
               and p.name not in ("help", "db")]
    unclean = []
    for option in options:
        for value, must_refuse in BAD.items():
            res = cli.invoke(app, ["--db", db, *path, option.opts[0], value, *needed], catch_exceptions=True)
            said = f"{' '.join(path)} {option.opts[0]} {value[:12]!r}"
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            if res.exception is not None and not isinstance(res.exception, SystemExit):
                # what `pxp` (pxp.cli.main.main) would print of it: one line, but no check ran before the work
                unclean.append(f"{said}: raised {type(res.exception).__name__} ({user_message(res.exception)})")
            elif "Traceback" in res.output or "[Errno" in res.output:
                unclean.append(f"{said}: {res.output[:200]!r}")
            elif res.exit_code == 1 and not all(ln.startswith(("error: ", "  ")) for ln in lines):
                unclean.append(f"{said}: {lines[:3]}")
            elif must_refuse and res.exit_code == 0:
                unclean.append(f"{said}: taken silently")
    assert unclean == []
