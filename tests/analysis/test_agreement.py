"""Inter-annotator agreement (docs/research.md, Agreement): Cohen's κ and Krippendorff's α (nominal) on the first
human tag, the match and agree judgements and the final prediction, checked against values
computed by hand on a small transcript file (three annotators, partial overlap), on SQLite and
PostgreSQL; the disagreement list; `pxp report --agreement` in json and table format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from pxp.analysis.agreement import (
    FIELDS,
    agreement,
    agreement_report,
    disagreements,
    field_agreement,
    krippendorff_alpha,
    render_agreement,
)
from pxp.analysis.queries import Selection
from pxp.analysis.report import ReportError, agreement_json
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.transcripts import import_transcripts
from pxp.storage.store import db_session, find_experiment

T, F = True, False


def _msg(sid: str, case: str, ann: str, j: int, sender: str, tag: str, pred: str,
         facts: tuple[bool, bool, bool] | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"session": sid, "instance": case, "annotator": ann, "j": j, "sender": sender,
                           "tag": tag, "prediction": pred, "explanation": "e"}
    if facts is not None:
        rec |= dict(zip(("match", "agree", "changed"), facts, strict=True))
    return rec


def session(sid: str, case: str, ann: str, first: str, match: bool, agree: bool, pred: str,
            final: str | None = None) -> list[dict[str, Any]]:
    """INIT; the human's first reply (tag and facts per DESIGN §1, j = 2 <= k); the machine's
    answer; after a REFUTE, the human's last message at j = 4 = n (REVISE to `final`, or REFUTE)."""
    out = [_msg(sid, case, ann, 1, "m", "INIT", "m", None),
           _msg(sid, case, ann, 2, "h", first, pred, (match, agree, F))]
    if first == "RATIFY":
        return [*out, _msg(sid, case, ann, 3, "m", "RATIFY", "m", (T, T, F))]
    out.append(_msg(sid, case, ann, 3, "m", "REFUTE", "m", (F, F, F)))
    if final is not None:
        return [*out, _msg(sid, case, ann, 4, "h", "REVISE", final, (T, F, T))]
    return [*out, _msg(sid, case, ann, 4, "h", "REFUTE", pred, (T, F, F))]


#: (annotator, case): first tag, match, agree, first prediction, final prediction (if revised)
STUDY: list[tuple[str, str, str, bool, bool, str, str | None]] = [
    ("h1", "c1", "RATIFY", T, T, "a", None),
    ("h2", "c1", "RATIFY", T, T, "a", None),
    ("h3", "c1", "RATIFY", T, T, "a", None),
    ("h1", "c2", "RATIFY", T, T, "b", None),
    ("h2", "c2", "REFUTE", F, T, "b", None),
    ("h3", "c2", "RATIFY", T, T, "x", None),
    ("h1", "c3", "REFUTE", F, F, "q", "c"),
    ("h2", "c3", "REFUTE", F, F, "q", "d"),
    ("h1", "c4", "REFUTE", T, F, "a", None),
    ("h2", "c4", "REFUTE", F, F, "a", None),
    ("h1", "c5", "RATIFY", T, T, "z", None),  # seen by h1 only: in no pair, not pairable for α
    ("h2", "c1", "REFUTE", F, F, "w", "v"),  # h2's second session on c1: only the earliest counts
]


def write_study(path: Path) -> Path:
    lines = []
    for i, (ann, case, first, match, agree, pred, final) in enumerate(STUDY, start=1):
        lines += [json.dumps(r) for r in session(f"s{i}", case, ann, first, match, agree, pred, final)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def study(any_engine: Engine, tmp_path: Path) -> tuple[Engine, int]:
    import_transcripts(any_engine, write_study(tmp_path / "study.jsonl"), name="study", n=4, k=3)
    with db_session(any_engine) as db:
        exp = find_experiment(db, name_or_id="study")
    assert exp is not None and exp.id is not None
    return any_engine, exp.id


# Hand-computed (Cohen: κ = (p_o − p_e)/(1 − p_e); Krippendorff, nominal: α = 1 − (n − 1)·Σ_{c≠k} o_ck
# / Σ_{c≠k} n_c·n_k from the coincidence matrix of the pairable cases c1–c4):
# tag   h1|h2 (R,R)(R,F)(F,F)(F,F): p_o 3/4, p_e 1/2·1/4 + 1/2·3/4 = 1/2, κ 1/2; h1|h3 always RATIFY: undefined;
#       h2|h3 (R,R)(F,R): p_o 1/2, p_e 1/2, κ 0 (chance level). o_RR 4, o_RF = o_FR = 1, o_FF 4, n_R = n_F = 5:
#       α = 1 − 9·2/50 = 0.64.
# match h1|h2 (T,T)(T,F)(F,F)(T,F): p_o 1/2, p_e 3/16 + 3/16, κ 0.2; h2|h3 κ 0. o_TT 4, o_TF = o_FT = 2, o_FF 2,
#       n_T 6, n_F 4: α = 1 − 9·4/48 = 0.25.
# agree h1|h2 (T,T)(T,T)(F,F)(F,F): κ 1; pairs with h3 all true: undefined. Perfect agreement: α = 1.
# prediction h1|h2 (a,a)(b,b)(c,d)(a,a): p_o 3/4, p_e 1/4 + 1/16, κ 7/11; h1|h3 and h2|h3 (a,a)(b,x): κ 1/3.
#       Off-diagonal o 4 (bx, xb, cd, dc) of n = 10; n_a 5, n_b 2, n_x = n_c = n_d = 1: Σ n_c·n_k = 100 − 32 = 68,
#       α = 1 − 9·4/68 = 8/17.
WANT: dict[str, dict[str, Any]] = {
    "tag": {"krippendorff_alpha": 0.64,
            "pairs": {"h1|h2": (0.5, 4), "h1|h3": (None, 2), "h2|h3": (0.0, 2)}},
    "match": {"krippendorff_alpha": 0.25,
              "pairs": {"h1|h2": (0.2, 4), "h1|h3": (None, 2), "h2|h3": (0.0, 2)}},
    "agree": {"krippendorff_alpha": 1.0,
              "pairs": {"h1|h2": (1.0, 4), "h1|h3": (None, 2), "h2|h3": (None, 2)}},
    "prediction": {"krippendorff_alpha": 8 / 17,
                   "pairs": {"h1|h2": (7 / 11, 4), "h1|h3": (1 / 3, 2), "h2|h3": (1 / 3, 2)}},
}


def check(report: dict[str, Any]) -> None:
    assert list(report) == ["agreement"] and list(report["agreement"]) == list(FIELDS)
    for f, want in WANT.items():
        got = report["agreement"][f]
        assert got["krippendorff_alpha"] == pytest.approx(want["krippendorff_alpha"]), f
        assert set(got["pairs"]) == set(want["pairs"]), f
        for pair, (kappa, n) in want["pairs"].items():
            assert got["pairs"][pair]["n"] == n, (f, pair)
            if kappa is None:
                assert got["pairs"][pair]["cohen_kappa"] is None, (f, pair)
            else:
                assert got["pairs"][pair]["cohen_kappa"] == pytest.approx(kappa), (f, pair)


def test_agreement_matches_hand_computed_values(study: tuple[Engine, int]) -> None:
    engine, exp_id = study
    check(agreement_report(engine, Selection(experiments=(exp_id,))))
    check(agreement_json(engine, ["study"]))
    # the pairwise κ on the first tag of the Annotators view agrees with the report's
    first = {f"{a.annotator_a}|{a.annotator_b}": a for a in agreement(engine, Selection(experiments=(exp_id,)))}
    assert first["h1|h2"].kappa == pytest.approx(0.5) and first["h1|h2"].instances == 4


def test_disagreement_list_names_both_sessions(study: tuple[Engine, int]) -> None:
    engine, exp_id = study
    dis = disagreements(engine, Selection(experiments=(exp_id,)))
    got = {(r.instance, r.field, r.annotator_a, r.value_a, r.annotator_b, r.value_b) for r in dis.itertuples()}
    assert got == {
        ("c2", "tag", "h1", "RATIFY", "h2", "REFUTE"), ("c2", "match", "h1", "true", "h2", "false"),
        ("c2", "prediction", "h1", "b", "h3", "x"),
        ("c2", "tag", "h2", "REFUTE", "h3", "RATIFY"), ("c2", "match", "h2", "false", "h3", "true"),
        ("c2", "prediction", "h2", "b", "h3", "x"),
        ("c3", "prediction", "h1", "c", "h2", "d"), ("c4", "match", "h1", "true", "h2", "false"),
    }
    assert len(dis) == 8
    # each row links the two sessions: their annotators and case are the row's
    with db_session(engine) as db:
        from pxp.storage.tables import Annotator, Instance, Session

        for r in dis.itertuples():
            for sid, ann in ((r.session_a, r.annotator_a), (r.session_b, r.annotator_b)):
                s = db.get(Session, int(sid))
                assert s is not None and s.annotator_id is not None
                assert db.get(Annotator, s.annotator_id).name == ann  # type: ignore[union-attr]
                assert db.get(Instance, s.instance_id).key == r.instance  # type: ignore[union-attr]
    # the earliest of h2's two sessions on c1 counts: no disagreement on c1 at all
    assert "c1" not in set(dis.instance)


def test_alpha_and_kappa_edge_cases() -> None:
    # perfect agreement with variation: α = κ = 1
    perfect = {"a": {1: "x", 2: "y"}, "b": {1: "x", 2: "y"}}
    assert krippendorff_alpha(perfect) == pytest.approx(1.0)
    assert field_agreement(perfect)["pairs"]["a|b"] == {"cohen_kappa": pytest.approx(1.0), "n": 2}
    # one value in all ratings (an annotator constant and the other too): undefined, not 1 or 0
    assert krippendorff_alpha({"a": {1: "x", 2: "x"}, "b": {1: "x", 2: "x"}}) is None
    # no case rated twice: undefined, and no pair
    apart = {"a": {1: "x"}, "b": {2: "y"}}
    assert field_agreement(apart) == {"krippendorff_alpha": None, "pairs": {}}
    # systematic disagreement: α below zero (Krippendorff 2011: 1 − (n−1)·o/e = 1 − 3·4/8)
    assert krippendorff_alpha({"a": {1: "x", 2: "y"}, "b": {1: "y", 2: "x"}}) == pytest.approx(-0.5)
    # Krippendorff (2011), nominal example without missing data: two coders, 10 units
    a = dict(enumerate("aaabbbbccc"))
    b = dict(enumerate("aabbbbcccc"))
    # o: aa 4, ab 1, ba 1, bb 6, bc 1, cb 1, cc 6; n_a 5, n_b 8, n_c 7, n = 20: α = 1 − 19·4/(400 − 138) = 1 − 76/262
    assert krippendorff_alpha({"a": a, "b": b}) == pytest.approx(1 - 76 / 262)


def test_report_agreement_cli(study: tuple[Engine, int]) -> None:
    engine, _ = study
    from pxp.cli.main import app

    url = engine.url.render_as_string(hide_password=False)
    res = CliRunner().invoke(app, ["--db", url, "report", "--experiment", "study", "--agreement", "--format", "json"])
    assert res.exit_code == 0, res.output
    check(json.loads(res.output))
    res = CliRunner().invoke(app, ["--db", url, "report", "--experiment", "study", "--agreement"])
    assert res.exit_code == 0, res.output
    assert "Krippendorff" in res.output and "h1" in res.output and "Disagreements (8)" in res.output
    assert "0.640" in res.output and "0.500" in res.output
    res = CliRunner().invoke(app, ["--db", url, "report", "--experiment", "nope", "--agreement"])
    assert res.exit_code != 0 and "no experiment named 'nope'" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["--db", url, "report", "--experiment", "study", "--agreement", "--by", "label"])
    assert res.exit_code != 0 and "--agreement takes no --by" in res.output and "Traceback" not in res.output
    for fmt in ("markdown", "csv"):
        res = CliRunner().invoke(app, ["--db", url, "report", "--experiment", "study", "--agreement", "--format", fmt])
        assert res.exit_code == 0 and "h1" in res.output, res.output


def test_unknown_experiment_and_empty_selection(engine: Engine) -> None:
    with pytest.raises(ReportError, match="no experiment named 'x'"):
        agreement_json(engine, ["x"])
    rep = agreement_report(engine, Selection())
    assert rep == {"agreement": {f: {"krippendorff_alpha": None, "pairs": {}} for f in FIELDS}}
    text = render_agreement(rep, disagreements(engine, Selection()))
    assert "No case was annotated by two annotators." in text and "Disagreements (0)" in text


def test_transcript_session_naming_two_annotators_is_refused(engine: Engine, tmp_path: Path) -> None:
    recs = session("s1", "c1", "h1", "RATIFY", T, T, "a")
    recs[2]["annotator"] = "h2"
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with pytest.raises(ImportProblems, match="session s1 names two annotators"):
        import_transcripts(engine, path, name="two", n=4, k=3)


def test_table_keeps_long_and_multiline_values_on_one_line() -> None:
    import pandas as pd

    dis = pd.DataFrame([("c1", "prediction", "h1", "C" * 80, 1, "h2", "line one\nline two", 2)],
                       columns=["instance", "field", "annotator_a", "value_a", "session_a", "annotator_b",
                                "value_b", "session_b"])
    rep = {"agreement": {"prediction": field_agreement({"h1": {1: "C" * 80}, "h2": {1: "x"}})}}
    text = render_agreement(rep, dis)
    row = text.splitlines()[-1]
    assert "C" * 39 + "…" in row and "line one line two" in row and "C" * 41 not in row
    assert "Disagreements (1)" in text and "prediction" in text


def _disagreements_by_loop(cases: Any) -> list[tuple[Any, ...]]:
    """The disagreement list as its definition reads: per case (in order of first appearance), every pair of its
    annotators (by name), every field where both gave a value and the values differ; then sorted by case key and
    pair, stably."""
    from itertools import combinations

    from pxp.analysis.agreement import _value

    df = cases.rename(columns={"first": "tag"})
    recs = []
    for _, d in df.groupby("instance_id", sort=False):
        rows = sorted(d.itertuples(index=False), key=lambda r: str(r.annotator))
        for x, y in combinations(rows, 2):
            for f in FIELDS:
                vx, vy = _value(f, getattr(x, f)), _value(f, getattr(y, f))
                if vx is not None and vy is not None and vx != vy:
                    recs.append((str(x.instance), f, str(x.annotator), vx, int(x.session_id), str(y.annotator), vy,
                                 int(y.session_id)))
    return sorted(recs, key=lambda r: (r[0], r[2], r[5]))


@pytest.mark.parametrize("seed", range(5))
def test_the_disagreement_list_is_its_definition_on_random_cases(seed: int) -> None:
    """Cases whose keys repeat across datasets, annotators that skip cases, missing and blank values."""
    import random

    import pandas as pd

    from pxp.analysis.agreement import _disagreements

    rng = random.Random(seed)
    rows = []
    for iid in rng.sample(range(1, 400), 60):
        for ann in rng.sample(["a1", "a2", "b", "c3", "Z"], rng.randint(1, 5)):
            rows.append((iid, ann, rng.randint(1, 10_000), rng.choice(["RATIFY", "REFUTE", None]),
                         rng.choice(["RATIFY", "REJECT"]), f"case-{iid % 7}", rng.choice([True, False, None]),
                         rng.choice([True, False, float("nan")]), rng.choice(["A", "B", " ", "", None])))
    cases = pd.DataFrame(rows, columns=["instance_id", "annotator", "session_id", "first", "last", "instance",
                                        "match", "agree", "prediction"])
    got = [tuple(r) for r in _disagreements(cases).itertuples(index=False)]
    assert got == _disagreements_by_loop(cases) and got
