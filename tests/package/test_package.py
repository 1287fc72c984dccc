"""The built wheel is the whole product (docs/operations.md, Install): installed into a fresh virtual
environment and run from an empty directory, `pxp demo`, `pxp report` and `pxp app` work
without the checkout (demo data, pages and migrations ship inside the package).

The venv has no system site-packages: pip installs the wheel with the dependencies its
metadata names (from pip's cache or the package index), so a dependency missing from
pyproject.toml fails here; pxp itself comes from the wheel, which the test checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.browser.test_browser_app import _free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.package, pytest.mark.xdist_group("wheel")]  # one wheel build per run (module fixture)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PXP_DATABASE_URL", "VIRTUAL_ENV", "PXP_DEBUG")}
    return env


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd}: {res.stdout}\n{res.stderr}"
    return res


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist),
          str(ROOT)], cwd=dist)
    (wheel,) = dist.glob("pxp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in ("pxp/app/streamlit_app.py", "pxp/app/views/annotate.py", "pxp/data/demo_data/demo-rad/cases.csv",
                    "pxp/data/demo_data/demo-rad/images/phantom_01.png", "pxp/data/demo_data/demo-drug/drugs.csv",
                    "pxp/storage/migrations/env.py"):
        assert shipped in names, shipped
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    _run([sys.executable, "-m", "venv", str(env_dir)], cwd=dist)
    _run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
          "--disable-pip-version-check", str(wheel)], cwd=dist, timeout=900)
    _run([str(env_dir / "bin" / "python"), "-m", "pip", "check"], cwd=dist)
    return env_dir


def test_no_pages_folder_beside_a_main_script() -> None:
    """Streamlit auto-discovers a `pages/` folder beside the main script (even one holding only
    __pycache__, left over from before the pages moved into pxp/app/views/): the first direct
    visit would then get Streamlit's file-name menu instead of pxp's router."""
    for main in (ROOT / "streamlit_app.py", ROOT / "pxp" / "app" / "streamlit_app.py"):
        assert main.is_file()
        assert not (main.parent / "pages").exists(), f"remove {main.parent / 'pages'}: Streamlit would find it"


def test_the_installed_wheel_runs_demo_report_and_app_from_any_directory(venv: Path, tmp_path: Path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    py, pxp = str(venv / "bin" / "python"), str(venv / "bin" / "pxp")
    where = _run([py, "-c", "import pxp, sys; print(pxp.__file__); print(sys.path)"], cwd=work).stdout
    assert where.startswith(str(venv)), where
    assert str(ROOT) not in where.splitlines()[1]

    demo = _run([pxp, "demo"], cwd=work)
    assert "loaded the demo" in demo.stdout
    assert (work / "pxp.db").exists()
    rep = _run([pxp, "report", "--experiment", "demo-rad-simulated"], cwd=work)
    assert "demo-rad-simulated" in rep.stdout

    port = _free_port()
    log = (tmp_path / "app.log").open("wb")
    proc = subprocess.Popen([pxp, "app", "--port", str(port), "--db", f"sqlite:///{work}/app.db",
                             "--server.headless", "true", "--server.address", "127.0.0.1"],
                            cwd=work, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, ok = time.monotonic() + 90, False
        while time.monotonic() < deadline and proc.poll() is None and not ok:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                    ok = r.status == 200
            except OSError:
                time.sleep(0.3)
        assert ok, (tmp_path / "app.log").read_text(errors="replace")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_pxp_app_passes_the_checkout_streamlit_settings() -> None:
    """`pxp app` applies the same settings as .streamlit/config.toml, whatever the working directory."""
    import tomllib

    from pxp.cli.app import MAIN, streamlit_command

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    cmd = streamlit_command(8600, ["--server.address", "0.0.0.0"])
    flags = dict(zip(cmd[5::2], cmd[6::2], strict=False))
    for section, values in config.items():
        for key, value in values.items():
            assert flags[f"--{section}.{key}"] == str(value).lower(), (section, key)
    assert cmd[4] == str(MAIN) and MAIN.exists() and flags["--server.port"] == "8600"
    assert cmd[-2:] == ["--server.address", "0.0.0.0"]
