"""Tidy exports (docs/research.md, Exports): every CSV pxp writes holds one value per cell, each column parses as the
type its header says (a unit in parentheses, or a name listed below), and the CSV holds the JSON's numbers."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from pxp.analysis.export import TABLES, export_experiment
from pxp.analysis.queries import Selection
from pxp.analysis.tables import figure1_csv_frame, table1_by
from pxp.app.router import VIEWS
from pxp.cli.main import app
from pxp.protocols.pxp.intelligibility import METRICS
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.controlled.runner import run_experiment
from pxp.running.pxp.experiments import create_experiment
from tests.factories import make_rad


def _count(v: str) -> float:
    x = float(v)  # a median of counts may be a half
    assert x >= 0 and (2 * x).is_integer(), v
    return x


def _share(v: str) -> float:
    x = float(v)
    assert 0 <= x <= 1, v
    return x


def _signed_share(v: str) -> float:
    x = float(v)
    assert -1 <= x <= 1, v
    return x


def _whole(v: str) -> int:
    return int(v)  # "3.0" or "3 (1.00)" fail: a whole number is written whole


def _text(v: str) -> str:
    return v


def _bool(v: str) -> bool:
    assert v in ("True", "False"), v
    return v == "True"


#: a header's unit (in parentheses) says its type; columns without a unit are named here
UNITS: dict[str, Callable[[str], Any]] = {"sessions": _count, "of total": _share, "accuracy": _share,
                                          "messages": _whole, "number": _whole, "proportion": _signed_share}
NAMED: dict[str, Callable[[str], Any]] = {
    "experiment": _text, "property": _text, "label": _text, "group": _text, "metric": _text, "split": _text,
    "a": _text, "b": _text, "repetitions": _whole, "mcnemar chi2": float, "mcnemar p": _share,
}
#: `pxp export`'s columns keep their names (messages.jsonl imports back as transcripts): the suffix says the unit
EXPORT: dict[str, Callable[[str], Any]] = {
    **dict.fromkeys(("repetition", "session", "ordinal", "j", "messages", "attempt", "tokens_in", "tokens_out",
                     "cache_read", "cache_write", "after_session", "instances"), _whole),
    **dict.fromkeys(("prediction_accuracy", "explanation_accuracy", "both_accuracy", "learn_val_before",
                     "learn_val_after"), _share),
    "latency_ms": float, "cost_usd": float, "created_at": datetime.fromisoformat, "content": json.loads,
    **dict.fromkeys(("match", "agree", "changed", "context_kept", "truth", "answer", "valid"), _bool),
}


def parse(text: str, types: dict[str, Callable[[str], Any]] | None = None) -> list[list[dict[str, Any]]]:
    """Each table of a CSV (tables are separated by one empty line) as typed rows; every cell parsed by its
    header's type, empty cells as None."""
    tables: list[list[dict[str, Any]]] = []
    head: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            head = None
            continue
        if head is None:
            head = row
            tables.append([])
            continue
        typed = {}
        for h, v in zip(head, row, strict=True):
            unit = h[h.index("(") + 1:-1] if h.endswith(")") else None
            kind = (types or {}).get(h) or (UNITS[unit] if unit else NAMED[h])
            typed[h] = kind(v) if v != "" else None
        tables.append([*tables.pop(), typed])
    return tables


def cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture
def two(engine: Engine) -> tuple[str, Engine]:
    make_rad(engine, per_label=2)
    for name, acc in (("strong", 0.9), ("weak", 0.1)):
        cfg = RunConfig(dataset="toy-rad", n=4, reps=3, seed=1, eval_at_start=True,
                        simulated={"accuracy": acc, "adopt": 0.0})
        run_experiment(engine, create_experiment(engine, cfg, name=name).id or 0)
    return engine.url.render_as_string(hide_password=False), engine


def test_table1_csv_is_tidy_and_holds_the_json(two: tuple[str, Engine]) -> None:
    url, _ = two
    table, series = parse(cli("--db", url, "report", "--experiment", "strong", "--experiment", "weak",
                              "--format", "csv", "--full"))
    reports = json.loads(cli("--db", url, "report", "--experiment", "strong", "--experiment", "weak",
                             "--format", "json"))
    assert [(r["experiment"], r["property"]) for r in table] == [(e, m) for e in ("strong", "weak") for m in METRICS]
    for row in table:
        rep = next(r for r in reports if r["experiment"] == row["experiment"])
        m = rep["metrics"][row["property"]]
        assert (row["count (sessions)"], row["proportion (of total)"], row["min (sessions)"],
                row["max (sessions)"]) == (m["count"], m["proportion"], m["min"], m["max"])
        assert (row["total (sessions)"], row["aborted (sessions)"], row["repetitions"]) == (
            rep["total_sessions"], rep["aborted_sessions"], rep["repetitions"])
    # the performance series: one row per experiment, split and point, the JSON's numbers
    for rep in reports:
        for split, s in rep["performance"].items():
            rows = [r for r in series if (r["experiment"], r["split"]) == (rep["experiment"], split)]
            assert [r["after session (number)"] for r in rows] == s["after_session"]
            for stat in ("median", "min", "max"):
                assert [r[f"both {stat} (accuracy)"] for r in rows] == s[stat]["both"]
    # without --full, Table 1 alone
    assert len(parse(cli("--db", url, "report", "--experiment", "strong", "--format", "csv"))) == 1


def test_compare_csv_holds_the_json_at_full_precision(two: tuple[str, Engine]) -> None:
    url, _ = two
    args = ("--db", url, "report", "--experiment", "strong", "--experiment", "weak", "--compare", "--format")
    (rows,) = parse(cli(*args, "csv"))
    cmp = json.loads(cli(*args, "json"))
    assert len(rows) == len(cmp["metrics"]) == 3
    for row, m in zip(rows, cmp["metrics"], strict=True):
        assert (row["a"], row["b"], row["property"]) == ("strong", "weak", m["metric"])
        assert row["a - b (proportion)"] == m["difference"] and row["ci low (proportion)"] == m["ci_low"]
        assert row["ci high (proportion)"] == m["ci_high"] and row["mcnemar p"] == m["p_value"]
        assert (row["pairs (sessions)"], row["a only (sessions)"], row["b only (sessions)"]) == (
            m["pairs"], m["a_only"], m["b_only"])
    # digits the page's three significant ones leave out are in the file
    assert any(not math.isclose(row[h], float(f"{row[h]:.3g}")) for row in rows for h in row if "proportion" in h)


def test_figure1_csv_carries_the_totals_and_proportions(two: tuple[str, Engine]) -> None:
    _, engine = two
    tables = table1_by(engine, Selection(), "experiment")
    (rows,) = parse(figure1_csv_frame(tables).to_csv(index=False))
    assert {r["group"] for r in rows} == {"strong", "weak"}
    for r in rows:
        total = tables[r["group"]].total_sessions
        assert r["total (sessions)"] == total > 0
        assert r["proportion (of total)"] == pytest.approx(r["median (sessions)"] / total)
        assert r["min proportion (of total)"] <= r["proportion (of total)"] <= r["max proportion (of total)"]


def downloads(at: AppTest) -> dict[str, tuple[dict[str, Any], bytes]]:
    """The page's downloads (pxp.app.download) by key: the header the button shows and the file's bytes."""
    out = {}
    for el in at.get("bidi_component"):
        head, _, body = el.proto.bytes.partition(b"\n")
        out[str(el.key)] = (json.loads(head), body)
    return out


def test_the_analytics_downloads_are_tidy(two: tuple[str, Engine], monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = two
    monkeypatch.setenv("PXP_DATABASE_URL", url)
    at = AppTest.from_file(str(VIEWS / "analytics.py"), default_timeout=60).run()
    assert not at.exception
    seen = {}
    for view, key in (("Table 1", "analytics_dl_table_csv"), ("Figure 1", "analytics_dl_fig1"),
                      ("Compare", "analytics_compare_table_csv")):
        at.radio(key="analytics_view").set_value(view).run()
        assert not at.exception
        head, body = downloads(at)[key]
        assert head["mime"] == "text/csv" and head["label"].isprintable() and head["label"].isascii()
        seen[head["name"]] = parse(body.decode("utf-8"))
    assert set(seen) == {"table1.csv", "figure1.csv", "comparison.csv"}
    assert all(len(t) == 1 and t[0] for t in seen.values())  # one table each, not empty


def test_export_csv_columns_parse_as_their_names_say(two: tuple[str, Engine], tmp_path: Path) -> None:
    _, engine = two
    out = export_experiment(engine, "strong", tmp_path / "x", "csv")
    for name in TABLES:
        tables = parse(out.files[name].read_text(encoding="utf-8"), {**EXPORT, **dict.fromkeys(
            ("instance", "split", "status", "stop_reason", "abort_reason", "annotator", "learn_note", "sender",
             "receiver", "tag", "prediction", "explanation", "provider", "model", "purpose", "error", "question"),
            _text)})
        assert len(tables) <= 1
        assert bool(tables) == (out.rows[name] > 0) or name == "probes"
