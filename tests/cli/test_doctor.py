"""`pxp doctor` (docs/operations.md, Troubleshooting): one line per check, ✓ or ✗ with what to do; exit 1 on
any ✗; keys are never shown."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pxp.cli.app import doctor_checks
from pxp.storage.store import get_engine
from tests.cli.test_fail_closed_config import GOOD_AUTH


@pytest.fixture
def metadata() -> Iterator[str]:
    """A provider's metadata document served locally (what `server_metadata_url` names)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"issuer": "http://x", "authorization_endpoint": "http://x/auth"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/openid-configuration"
    server.shutdown()


def _auth(path: Path, meta: str) -> Path:
    path.write_bytes(GOOD_AUTH.replace(b"http://localhost:1/.well-known/openid-configuration", meta.encode()))
    return path


def test_a_sound_setup_is_all_ticks_and_never_shows_a_key(tmp_path: Path, metadata: str) -> None:
    url = f"sqlite:///{tmp_path / 'pxp.db'}"
    get_engine(url)
    checks = doctor_checks([str(_auth(tmp_path / "secrets.toml", metadata))], url,
                           {"ANTHROPIC_API_KEY": "sk-ant-not-to-be-shown"})
    lines = [line for _, line in checks]
    assert all(ok for ok, _ in checks), lines
    assert any(line.startswith("database: ") and "pxp schema" in line for line in lines)
    assert f"login: {metadata} answers" in lines
    assert "ANTHROPIC_API_KEY: set (in the environment)" in lines
    assert not any("sk-ant" in line for line in lines)


def test_each_problem_is_a_cross_with_what_to_do(tmp_path: Path) -> None:
    bad = tmp_path / "secrets.toml"
    bad.write_bytes(b'[auht]\nx = 1\n')
    checks = doctor_checks([str(bad)], "postgresql+psycopg://postgres@127.0.0.1:1/none", {})
    crosses = [line for ok, line in checks if not ok]
    assert crosses[0] == (f"configuration: {bad}: 'auht' is not a setting pxp knows: did you mean [auth]? "
                          "Rename it, or remove it")
    assert crosses[1].startswith("database: ") and "cannot be reached" in crosses[1]
    checks = doctor_checks([str(_auth(bad, "http://127.0.0.1:1/.well-known/openid-configuration"))],
                           f"sqlite:///{tmp_path / 'new.db'}", {})
    crosses = [line for ok, line in checks if not ok]
    assert len(crosses) == 1 and crosses[0].startswith("login: the provider's metadata"), crosses
    assert "cannot be reached" in crosses[0]


def test_pxp_doctor_exits_1_on_a_cross(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("PXP_DATABASE_URL", None)
    run = [sys.executable, "-m", "pxp.cli.main", "doctor"]
    done = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("✓ configuration: none"), done.stdout + done.stderr
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_bytes(b'[auth\n')
    done = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout.startswith("✗ configuration: "), done.stdout + done.stderr
    assert all(line[:2] in ("✓ ", "✗ ") for line in done.stdout.splitlines())


def test_doctor_checks_the_saved_model_is_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a local server saved in Settings, `pxp doctor` says whether the machine's model is among those
    its /v1/models lists (docs/research.md, Local models)."""
    from pxp.storage.store import db_session
    from pxp.storage.tables import AppSetting
    from tests.llm_server import FakeLLM

    url = f"sqlite:///{tmp_path / 'pxp.db'}"
    engine = get_engine(url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with FakeLLM() as server:
        server.models = ["qwen3:8b", "llama3.1:8b"]
        with db_session(engine) as db:
            db.add(AppSetting(key="base_url", value=server.openai_url))
            db.add(AppSetting(key="generator", value="openai:qwen3:8b"))
        assert (True, f"model: openai:qwen3:8b is served by {server.openai_url}") in doctor_checks([], url, {})
        with db_session(engine) as db:
            row = db.get(AppSetting, "generator")
            assert row is not None
            row.value = "openai:qwen3:32b"
            db.add(row)
        [line] = [line for ok, line in doctor_checks([], url, {}) if not ok]
        assert line.startswith("model: openai:qwen3:32b is not among the models") and "qwen3:8b" in line
