"""`pxp app` and `pxp doctor` read Streamlit's options without importing Streamlit (docs/development.md,
"Start-up"): the same secrets files and the same "address given" as Streamlit's own configuration reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pxp.cli.app import address_given, secrets_files

STREAMLIT_VIEW = """
import json
from streamlit import config
from streamlit.config_option import ConfigOption
config.get_config_options()
print(json.dumps({name: [config.get_option(name), config.get_where_defined(name) != ConfigOption.DEFAULT_DEFINITION]
                  for name in ("secrets.files", "server.address")}))
"""

PXP_VIEW = """
import json
from pxp.cli.app import address_given, secrets_files
files, named = secrets_files([])
print(json.dumps({"secrets.files": [files, named], "server.address": address_given([])}))
"""

SETUPS = {
    "nothing": {},
    "home sets the files": {"home": '[secrets]\nfiles = ["/srv/a.toml", "/srv/b.toml"]\n'},
    "project overrides home": {"home": '[secrets]\nfiles = ["/srv/a.toml"]\n',
                               "project": '[secrets]\nfiles = ["/srv/p.toml"]\n[server]\naddress = "0.0.0.0"\n'},
    "home sets the address only": {"home": '[server]\naddress = "10.0.0.2"\nport = 8600\n'},
    "a broken project file": {"home": '[secrets]\nfiles = ["/srv/a.toml"]\n', "project": "[secrets\nfiles = 1\n"},
}


def _run(code: str, home: Path, cwd: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env.update(HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_options_read_are_streamlits(setup: str, tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "project"
    for where, folder in (("home", home), ("project", cwd)):
        (folder / ".streamlit").mkdir(parents=True)
        if where in SETUPS[setup]:
            (folder / ".streamlit" / "config.toml").write_text(SETUPS[setup][where], encoding="utf-8")
    theirs, ours = _run(STREAMLIT_VIEW, home, cwd), _run(PXP_VIEW, home, cwd)
    assert ours["secrets.files"] == theirs["secrets.files"]
    assert ours["server.address"] == theirs["server.address"][1]


def test_environment_variables_count_as_streamlit_run_takes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """`streamlit run` takes STREAMLIT_SECTION_OPTION as the flag (click's envvar; several values split on spaces)."""
    monkeypatch.setenv("STREAMLIT_SECRETS_FILES", "/srv/x.toml /srv/y.toml")
    monkeypatch.setenv("STREAMLIT_SERVER_ADDRESS", "0.0.0.0")
    assert secrets_files([]) == (["/srv/x.toml", "/srv/y.toml"], True)
    assert address_given([])
    assert secrets_files(["--secrets.files", "/srv/flag.toml"]) == (["/srv/flag.toml"], True)  # a flag wins
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS")
    monkeypatch.setenv("HOME", "/nonexistent-home")
    assert not address_given([])
