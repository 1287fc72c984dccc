"""The Scorekeeping page through streamlit.testing.v1.AppTest: its leaderboard equals
`pxp scorekeeping report`, the probe curve has one point per round, the episode viewer shows the
dialogue without the probes, and untrusted text is shown as text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from pxp.app.router import VIEWS as VIEW_DIR
from pxp.protocols.scorekeeping.scores import QUALITY, QUALITY_STD
from pxp.storage.store import get_engine
from tests.app.test_app import vega_charts
from tests.factories import make_rad

PAGE = str(VIEW_DIR / "scorekeeping.py")


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    engine = get_engine(url)
    make_rad(engine)  # a dataset, so the app does not load its demo data
    yield url, engine


def cli(url: str, *args: str) -> str:
    from pxp.cli.main import app

    res = CliRunner().invoke(app, ["--db", url, "scorekeeping", *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def run_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_empty_page_says_how_to_start(app_db: tuple[str, Engine]) -> None:
    at = run_page()
    assert "pxp scorekeeping run" in at.info[0].value


def test_leaderboard_curve_and_episode_viewer(app_db: tuple[str, Engine]) -> None:
    url, _ = app_db
    cli(url, "run", "--answerer", "simulated", "--name", "a", "--seed", "1", "--probe-accuracy", "0.7")
    cli(url, "run", "--answerer", "simulated", "--name", "b", "--seed", "2", "--probe-accuracy", "1",
        "--slot-accuracy", "1", "--format-error-rate", "0")
    at = run_page()
    assert at.multiselect(key="sk_games").value == ["b", "a"]
    board = at.dataframe[0].value
    rep = json.loads(cli(url, "report", "--name", "b", "--name", "a", "--format", "json"))
    # both games run the answerer "simulated": one model, all 40 episodes
    assert list(board["model"]) == ["simulated"] and list(board["episodes"]) == [40]
    assert board["Quality Score"][0] == f"{rep['models']['simulated']['Quality Score']:.2f}"
    assert board["% Played"][0] == f"{rep['models']['simulated']['% Played']:.1f}"
    (board_spec, bars), (_, curve) = vega_charts(at)
    assert [layer["mark"]["type"] for layer in board_spec["layer"]] == ["bar", "errorbar", "point"]
    q, sd = rep["models"]["simulated"][QUALITY], rep["models"]["simulated"][QUALITY_STD]
    assert list(bars.quality) == [pytest.approx(q)] and list(bars.hi) == [pytest.approx(q + sd)]
    assert set(curve.model) == {"simulated"} and list(curve["round"]) == [0, 1, 2, 3, 4, 5]
    at.multiselect(key="sk_games").set_value(["b"]).run()
    at.selectbox(key="sk_view_game").set_value("b").run()
    assert not at.exception
    key = at.selectbox(key="sk_episode").value
    assert key == "simulated/job-interview/episode_0"
    texts = [t.value for t in at.text]
    assert texts[1] == "Ok." and any(t.startswith("ANSWER:") for t in texts)
    assert not any(t.startswith("ME:") or t.startswith("ASIDE:") for t in texts)  # probes are apart
    probes = at.dataframe[-1].value
    assert len(probes) == 30 and bool(probes["correct"].all())  # b answers every probe right
