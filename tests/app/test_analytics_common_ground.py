"""The Analytics page's "Common ground" view: probe accuracy against one-way intelligibility (docs/research.md,
Common-ground probe)."""

from __future__ import annotations

from sqlalchemy import Engine

from pxp.analysis.common_ground import probe_sessions
from tests.app.test_analytics_page import app_db, controlled, ok, page  # noqa: F401  (app_db: a fixture)
from tests.app.test_app import vega_charts


def test_common_ground_view_plots_probed_sessions(app_db: tuple[str, Engine]) -> None:  # noqa: F811
    _, engine = app_db
    plain = controlled(engine, "plain", reps=1)
    at = page()
    ok(at.radio(key="analytics_view").set_value("Common ground").run())
    assert any("No common-ground probes" in i.value for i in at.info)
    probed = controlled(engine, "probed", reps=2, probe=True)
    at = page()
    ok(at.radio(key="analytics_view").set_value("Common ground").run())
    ((spec, data),) = vega_charts(at)
    shown = at.dataframe[0].value
    want = probe_sessions(engine, [probed.id or 0])
    # the chart: each probed session a point, its accuracy against one-way intelligibility for the human
    assert spec["description"] and spec["encoding"]["y"]["field"] == "accuracy"
    assert list(data.accuracy) == [r["accuracy"] for r in want]
    assert list(data.one_way) == ["yes" if r["one_way_human"] else "no" for r in want]
    assert list(shown["session_id"]) == [r["session_id"] for r in want]
    assert list(shown["accuracy"]) == [r["accuracy"] for r in want]
    # only the selected experiment with no probes: the empty note
    ok(at.multiselect(key="analytics_experiments").set_value([plain.id]).run())
    assert any("No common-ground probes" in i.value for i in at.info)
