"""Every fault line names its database (docs/operations.md, Troubleshooting): before an experiment exists and in
imports alike, a database the command cannot use is one line naming it (the URL without its password, or the file)
and the fault."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

URL = "postgresql+psycopg://pxp:secret-pw@127.0.0.1:1/study"
SHOWN = "postgresql+psycopg://pxp:***@127.0.0.1:1/study"


@pytest.mark.parametrize("command", [
    ["import", "csv", "{csv}", "--task", "text", "--map", "key=input", "--name", "d"],
    ["run", "--dataset", "demo-rad", "--no-progress"],
    ["report", "--experiment", "x"],
    ["validate"],
    ["users", "list"],
])
def test_an_unreachable_database_is_named_in_the_one_line(tmp_path: Path, command: list[str]) -> None:
    csv = tmp_path / "cases.csv"
    csv.write_text("key,prediction,explanation\nk1,yes,because\n")
    args = [a.replace("{csv}", str(csv)) for a in command]
    done = subprocess.run([sys.executable, "-m", "pxp.cli.main", "--db", URL, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: the database {SHOWN} failed: the database server cannot be reached"], done.stderr
    assert "secret-pw" not in done.stderr
