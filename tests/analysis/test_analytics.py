"""pxp.analysis.queries and tables (the SQL path of Table 1 and Figure 1) against the pure reference in
pxp.protocols.pxp.intelligibility, on random data with aborted and open sessions, on SQLite and
PostgreSQL; the DESIGN §2 vectors imported as transcripts; cache invalidation; the views."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, update
from sqlmodel import col, select

from pxp.analysis import agreement, costs, figures, performance, queries, tables
from pxp.analysis.queries import Selection
from pxp.data.importers.common import ImportProblems
from pxp.data.importers.transcripts import import_transcripts
from pxp.protocols.pxp.intelligibility import (
    METRICS,
    SessionTags,
    cohen_kappa,
    flags_by_bound,
    session_flags,
    signature,
    signature_flags,
    table1,
)
from pxp.protocols.pxp.rules import Sender, Tag
from pxp.storage.store import db_session, find_experiment
from pxp.storage.tables import (
    Annotator,
    Dataset,
    Evaluation,
    Experiment,
    Instance,
    LLMCall,
    Message,
    Run,
    Session,
)
from tests.factories import fit_content

TAGS = list(Tag)
tag_lists = st.lists(st.tuples(st.sampled_from(list(Sender)), st.sampled_from(TAGS)), max_size=14)


# --- the pure signature path equals Definitions 1–2 ------------------------------------------


@settings(max_examples=400, deadline=None)
@given(tag_lists)
def test_signature_flags_equal_definitions(tags: list[tuple[Sender, Tag]]) -> None:
    sig = signature(tags)
    assert signature_flags(sig) == session_flags(tags)
    n = len(tags) + 3
    by = flags_by_bound(tags, n)
    for j in range(1, n + 1):
        assert signature_flags(sig, j) == {name: by[name][j - 1] for name in METRICS}


def test_cohen_kappa_textbook() -> None:
    # 50 items: both yes 20, both no 15, a-yes/b-no 5, a-no/b-yes 10 -> p_o = .7, p_e = .5, κ = .4
    pairs = [("y", "y")] * 20 + [("n", "n")] * 15 + [("y", "n")] * 5 + [("n", "y")] * 10
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([]) is None
    assert cohen_kappa([("RATIFY", "RATIFY")] * 3) is None  # p_e = 1: undefined
    assert cohen_kappa([("a", "b"), ("b", "a")]) == pytest.approx(-1.0)


# --- random databases: SQL path == reference --------------------------------------------------


def random_tags(rng: random.Random, length: int) -> list[tuple[Sender, Tag]]:
    """Mostly INTERACT-shaped sequences, sometimes arbitrary ones (imported, non-conformant)."""
    if rng.random() < 0.2:
        return [(rng.choice(list(Sender)), rng.choice(TAGS)) for _ in range(length)]
    out = [(Sender.MACHINE, Tag.INIT)]
    for j in range(2, length + 1):
        out.append((Sender.HUMAN if j % 2 == 0 else Sender.MACHINE,
                    rng.choice([Tag.RATIFY, Tag.REFUTE, Tag.REVISE, Tag.REJECT])))
    return out


def build_random(engine: Engine, seed: int, *, experiments: int = 2, reps: int = 3, sessions: int = 25,
                 max_len: int = 10, n: int = 10, annotators: str = "h") -> dict[int, dict[int, list[dict[str, Any]]]]:
    """Random experiments; returns {experiment id: {repetition: [session facts]}}."""
    rng = random.Random(seed)
    truth: dict[int, dict[int, list[dict[str, Any]]]] = {}
    with db_session(engine) as db:
        ds = Dataset(name=f"rand-{seed}", task="rad")
        db.add(ds)
        anns = [Annotator(name=f"{annotators}{i}") for i in (1, 2)]
        db.add_all(anns)
        db.flush()
        insts = [Instance(dataset_id=ds.id or 0, key=f"x{i}", ordinal=i, label=rng.choice(["A", "B", "C"]))
                 for i in range(sessions)]
        db.add_all(insts)
        db.flush()
        for e in range(experiments):
            exp = Experiment(name=f"exp{seed}-{e}", task="rad", n=n)
            db.add(exp)
            db.flush()
            truth[exp.id or 0] = {}
            for r in range(1, reps + 1):
                run = Run(experiment_id=exp.id or 0, repetition=r)
                db.add(run)
                db.flush()
                truth[exp.id or 0][r] = []
                for o, inst in enumerate(insts, start=1):
                    status = rng.choices(["finished", "aborted", "open"], [8, 1, 1])[0]
                    tags = random_tags(rng, rng.randint(0 if status != "finished" else 1, max_len))
                    ann = rng.choice([None, *anns])
                    day = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(days=rng.randint(0, 3))
                    s = Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=o, n=n, status=status,
                                annotator_id=ann.id if ann else None, created_at=day, updated_at=day)
                    db.add(s)
                    db.flush()
                    for j, (sender, tag) in enumerate(tags, start=1):
                        db.add(Message(session_id=s.id or 0, j=j, sender=sender.value,
                                       receiver=sender.other.value, tag=tag.value))
                    truth[exp.id or 0][r].append({
                        "id": s.id, "tags": tags, "status": status, "label": inst.label,
                        "annotator": ann.name if ann else "", "day": day.date(),
                    })
    return truth


def reference(per_rep: dict[int, list[dict[str, Any]]], n: int) -> dict[str, Any]:
    """pxp.protocols.pxp.intelligibility.table1 on the closed sessions; repetitions with none are left out."""
    runs = {
        r: [SessionTags(tuple(s["tags"]), aborted=s["status"] == "aborted") for s in ss if s["status"] != "open"]
        for r, ss in per_rep.items()
    }
    return table1({r: v for r, v in runs.items() if v}, n).as_json("x")


def test_sql_equals_reference_on_random_data(any_engine: Engine) -> None:
    truth = build_random(any_engine, seed=11)
    for exp_id, per_rep in truth.items():
        got = tables.table1(any_engine, Selection(experiments=(exp_id,)), n=10).as_json("x")
        assert got == reference(per_rep, 10)
        assert got["repetitions"] == 3

    # several experiments pooled repetition by repetition
    pooled: dict[int, list[dict[str, Any]]] = {}
    for per_rep in truth.values():
        for r, ss in per_rep.items():
            pooled.setdefault(r, []).extend(ss)
    assert tables.table1(any_engine, Selection(), n=10).as_json("x") == reference(pooled, 10)

    # filters: repetition, label, annotator, date; and grouping by annotator / label
    e1 = next(iter(truth))
    per_rep = truth[e1]
    sel = Selection(experiments=(e1,), repetitions=(2, 3), labels=("A", "B"))
    want = reference({r: [s for s in ss if s["label"] in ("A", "B")] for r, ss in per_rep.items() if r in (2, 3)}, 10)
    assert tables.table1(any_engine, sel, n=10).as_json("x") == want

    day = datetime(2026, 3, 2).date()
    sel = Selection(experiments=(e1,), since=day, until=day)
    want = reference({r: [s for s in ss if s["day"] == day] for r, ss in per_rep.items()}, 10)
    assert tables.table1(any_engine, sel, n=10).as_json("x") == want

    by_ann = tables.table1_by(any_engine, Selection(experiments=(e1,)), "annotator", n=10)
    assert set(by_ann) <= {"", "h1", "h2"}
    for name, t in by_ann.items():
        want = reference({r: [s for s in ss if s["annotator"] == name] for r, ss in per_rep.items()}, 10)
        assert t.as_json("x") == want, name
    by_label = tables.table1_by(any_engine, Selection(experiments=(e1,)), "label", n=10)
    for name, t in by_label.items():
        want = reference({r: [s for s in ss if s["label"] == name] for r, ss in per_rep.items()}, 10)
        assert t.as_json("x") == want, name

    # tag transitions: consecutive (sender, tag) pairs of the closed sessions
    want_tr: dict[tuple[str, str, str, str], int] = {}
    for ss in per_rep.values():
        for s in ss:
            if s["status"] != "open":
                for (s1, t1), (s2, t2) in zip(s["tags"], s["tags"][1:], strict=False):
                    k = (s1.value, t1.value, s2.value, t2.value)
                    want_tr[k] = want_tr.get(k, 0) + 1
    tr = tables.tag_transitions(any_engine, Selection(experiments=(e1,)))
    assert {tuple(r[:4]): r[4] for r in tr.itertuples(index=False)} == want_tr

    # per-session flags (downloads) equal session_flags; open sessions are not listed
    frame = tables.session_frame(any_engine, Selection(experiments=(e1,)))
    closed = {s["id"]: s for ss in per_rep.values() for s in ss if s["status"] != "open"}
    assert sorted(frame.session_id) == sorted(closed)
    for row in frame.to_dict("records"):
        s = closed[row["session_id"]]
        want_flags = session_flags(s["tags"], aborted=s["status"] == "aborted")
        assert {m: bool(row[m]) for m in METRICS} == want_flags
        assert row["messages"] == len(s["tags"])


def test_long_sessions_use_several_words(engine: Engine) -> None:
    """Sessions longer than 15 messages (n = 40) pack into several words, still exact."""
    truth = build_random(engine, seed=5, experiments=1, reps=2, sessions=30, max_len=40, n=40)
    exp_id, per_rep = next(iter(truth.items()))
    got = tables.table1(engine, Selection(experiments=(exp_id,))).as_json("x")
    assert got == reference(per_rep, 40)
    assert len(got["by_message"]["two_way"]) == 40
    # a bound smaller than the longest session (non-conformant import): still exact
    assert tables.table1(engine, Selection(experiments=(exp_id,)), n=7).as_json("x") == reference(per_rep, 7)


def test_sql_equals_reference_on_edge_cases(any_engine: Engine) -> None:
    """n = 1, bounds at and around the 15-message word, sessions with no message or only INIT,
    aborted sessions with messages (never intelligible), all-aborted repetitions, and an
    experiment with runs but no closed session."""
    rng = random.Random(3)
    init = (Sender.MACHINE, Tag.INIT)

    def shapes(n: int) -> list[list[tuple[Sender, Tag]]]:
        out: list[list[tuple[Sender, Tag]]] = [[], [init]]
        for length in range(2, n + 3):
            out.append([init, *((Sender.HUMAN if j % 2 == 0 else Sender.MACHINE,
                                 rng.choice([Tag.RATIFY, Tag.REFUTE, Tag.REVISE, Tag.REJECT]))
                                for j in range(2, length + 1))])
        return out

    truth: dict[int, tuple[int, dict[int, list[SessionTags]]]] = {}
    with db_session(any_engine) as db:
        ds = Dataset(name="edges", task="rad")
        db.add(ds)
        db.flush()
        inst = Instance(dataset_id=ds.id or 0, key="x", ordinal=1)
        db.add(inst)
        db.flush()
        for n in (1, 2, 14, 15, 16, 31):
            for mix in ("finished", "aborted", "mixed"):
                exp = Experiment(name=f"edge-{n}-{mix}", task="rad", n=n)
                db.add(exp)
                db.flush()
                truth[exp.id or 0] = (n, {})
                for r in (1, 2, 3):
                    run = Run(experiment_id=exp.id or 0, repetition=r)
                    db.add(run)
                    db.flush()
                    for o, tags in enumerate(shapes(n), start=1):
                        status = mix if mix != "mixed" else rng.choice(["finished", "aborted"])
                        s = Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=o, n=n, status=status)
                        db.add(s)
                        db.flush()
                        for j, (sender, tag) in enumerate(tags, start=1):
                            db.add(Message(session_id=s.id or 0, j=j, sender=sender.value,
                                           receiver=sender.other.value, tag=tag.value))
                        truth[exp.id or 0][1].setdefault(r, []).append(
                            SessionTags(tuple(tags), aborted=status == "aborted"))
        idle = Experiment(name="edge-idle", task="rad", n=10)
        db.add(idle)
        db.flush()
        run = Run(experiment_id=idle.id or 0, repetition=1)
        db.add(run)
        db.flush()
        db.add(Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=1, n=10))  # open: never counted
        idle_id = idle.id or 0
    for exp_id, (n, runs) in truth.items():
        got = tables.table1(any_engine, Selection(experiments=(exp_id,)), n=n).as_json("x")
        assert got == table1(runs, n).as_json("x"), exp_id
    with db_session(any_engine) as db:
        aborted_only = [e.id or 0 for e in db.exec(select(Experiment).where(col(Experiment.name).endswith("-aborted")))]
    for exp_id in aborted_only:  # every session aborted, INIT-only and long ones alike: nothing intelligible
        t = tables.table1(any_engine, Selection(experiments=(exp_id,)))
        assert t.aborted_sessions == t.total_sessions > 0
        assert all(m.max == 0 for m in t.metrics.values()) and all(max(v) == 0 for v in t.by_message.values())
    idle_t = tables.table1(any_engine, Selection(experiments=(idle_id,)))
    assert (idle_t.repetitions, idle_t.total_sessions, idle_t.by_message["two_way"]) == (0, 0, [0] * 10)


def test_empty_selection(engine: Engine) -> None:
    t = tables.table1(engine, Selection(experiments=(999,)))
    assert t.repetitions == 0 and t.total_sessions == 0
    assert tables.session_frame(engine, Selection()).empty
    assert tables.tag_transitions(engine, Selection()).empty
    assert tables.transition_matrix(tables.tag_transitions(engine, Selection())).empty
    assert performance.evaluations(engine, Selection()).empty
    assert costs.llm_costs(engine, Selection()).empty
    assert agreement.agreement(engine, Selection()) == []
    assert tables.session_lengths(engine, Selection()).empty
    assert (tables.figure1_frame(t)["median"] == 0).all()
    assert figures.figure1({"x": t})["data"]["values"]["median"].eq(0).all()
    assert figures.figure2(performance.evaluations(engine, Selection()))["data"]["values"].empty


#: a name that is markup, a Vega expression and a Vega-Lite field path at once
HOSTILE = '<b>x</b> & "y" {datum.a} [0].b'


def _fields_and_expressions(node: Any) -> tuple[set[str], list[str]]:
    """Every `field` a spec names, and every place it holds an expression (a string Vega would evaluate)."""
    fields: set[str] = set()
    exprs: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "field" and isinstance(v, str):
                fields.add(v)
            if k in ("expr", "calculate", "labelExpr") or (k in ("filter", "test") and isinstance(v, str)):
                exprs.append(f"{k}: {v}")
            f, e = _fields_and_expressions(v)
            fields |= f
            exprs += e
    elif isinstance(node, list):
        for v in node:
            f, e = _fields_and_expressions(v)
            fields |= f
            exprs += e
    return fields, exprs


def test_names_are_chart_data_never_fields_or_expressions(engine: Engine, tmp_path: Path) -> None:
    """Vega-Lite reads dots and brackets in a field as a path and evaluates expressions: a name people chose is
    only ever a data value (pxp.analysis.figures)."""
    import pandas as pd

    import_transcripts(engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name=HOSTILE, n=10, k=3)
    t = tables.table1(engine, Selection())
    evals = pd.DataFrame([{"experiment": HOSTILE, "repetition": 1, "after_session": s, "prediction": 0.5,
                           "explanation": 0.4, "both": 0.3, "instances": 5} for s in range(3)])
    board = pd.DataFrame([{"model": HOSTILE, "episodes": 2, "% Played": 50.0, "Quality Score": 40.0,
                           "Quality Score (std)": None}])
    lengths = pd.DataFrame([{"messages": 3, "status": "finished", "stop_reason": HOSTILE, "sessions": 2}])
    specs = {"figure1": (figures.figure1({HOSTILE: t, "plain": t}), "panel"),
             "figure2": (figures.figure2(evals), "panel"), "leaderboard": (figures.leaderboard(board), "model"),
             "probe_curve": (figures.probe_curve({HOSTILE: {0: (0.5, 3)}}), "model"),
             "lengths": (figures.lengths(lengths), "ended")}
    for what, (spec, column) in specs.items():
        data = spec["data"]["values"]
        assert HOSTILE in set(data[column]), what
        rest = {k: v for k, v in spec.items() if k != "data"}
        assert HOSTILE not in json.dumps(rest, ensure_ascii=False), what
        fields, exprs = _fields_and_expressions(rest)
        assert fields <= set(data.columns) and all(f.isidentifier() for f in fields), (what, fields)
        assert exprs == [], (what, exprs)
        assert spec["description"], what


# --- DESIGN §2 vectors as transcripts ---------------------------------------------------------

VECTORS = {
    "v1": [("m", "INIT"), ("h", "RATIFY"), ("m", "RATIFY")],
    "v2": [("m", "INIT"), ("h", "REFUTE"), ("m", "REVISE"), ("h", "RATIFY"), ("m", "RATIFY")],
    "v4": [("m", "INIT"), ("h", "REFUTE"), ("m", "REFUTE"), ("h", "REJECT")],
}


def write_vectors(path: Path, vectors: dict[str, list[tuple[str, str]]]) -> Path:
    lines = []
    for sid, tags in vectors.items():
        preds = fit_content(tags)  # each tag true to its content
        for j, ((sender, tag), pred) in enumerate(zip(tags, preds, strict=True), start=1):
            lines.append(json.dumps({"session": sid, "instance": f"case-{sid}", "j": j, "sender": sender,
                                     "tag": tag, "prediction": pred, "explanation": "e"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_design_vectors_give_the_expected_table_and_curves(any_engine: Engine, tmp_path: Path) -> None:
    import_transcripts(any_engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="vectors", n=10, k=3)
    with db_session(any_engine) as db:
        found = find_experiment(db, name_or_id="vectors")
    assert found is not None and found.id is not None
    exp = {"id": found.id}
    rep = tables.table1(any_engine, Selection(experiments=(exp["id"],)), n=10).as_json("vectors")
    counts = {m: rep["metrics"][m]["count"] for m in METRICS}
    assert rep["total_sessions"] == 3 and rep["aborted_sessions"] == 0 and rep["repetitions"] == 1
    assert counts == {"one_way_human": 2, "one_way_machine": 2, "two_way": 2, "strong_human": 1,
                      "strong_machine": 2, "ultra_strong_human": 0, "ultra_strong_machine": 1}
    assert rep["metrics"]["two_way"]["proportion"] == round(2 / 3, 4)
    bm = rep["by_message"]
    assert bm["one_way_human"] == [0, 1, 1, 2, 2, 2, 2, 2, 2, 2]
    assert bm["one_way_machine"] == [0, 0, 2, 2, 2, 2, 2, 2, 2, 2]
    assert bm["two_way"] == [0, 0, 1, 2, 2, 2, 2, 2, 2, 2]
    assert bm["strong_human"] == [0, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert bm["strong_machine"] == [0, 0, 2, 2, 2, 2, 2, 2, 2, 2]
    assert bm["ultra_strong_machine"] == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    assert bm["ultra_strong_human"] == [0] * 10
    # Figure 1 data: a single repetition has no spread
    f1 = tables.figure1_frame(tables.table1(any_engine, Selection(experiments=(exp["id"],))))
    assert (f1["min"] == f1["median"]).all() and (f1["max"] == f1["median"]).all()
    # transitions: which tag answers which
    tr = tables.transition_matrix(tables.tag_transitions(any_engine, Selection(experiments=(exp["id"],))))
    assert tr.loc["machine INIT", "RATIFY"] == 1 and tr.loc["machine INIT", "REFUTE"] == 2
    assert tr.loc["human REFUTE", "REVISE"] == 1 and tr.loc["machine REFUTE", "REJECT"] == 1
    lengths = tables.session_lengths(any_engine, Selection(experiments=(exp["id"],)))
    assert dict(zip(lengths.messages, lengths.sessions, strict=True)) == {3: 1, 4: 1, 5: 1}


def test_illegal_vector_is_refused(engine: Engine, tmp_path: Path) -> None:
    bad = {"v3": [("m", "INIT"), ("h", "REVISE"), ("m", "RATIFY")]}
    with pytest.raises(ImportProblems, match="REVISE"):
        import_transcripts(engine, write_vectors(tmp_path / "bad.jsonl", bad), name="bad", n=10, k=3)
    assert queries.options(engine).experiments == []


# --- cache invalidation -----------------------------------------------------------------------


def test_cache_is_invalidated_by_new_messages_and_status_changes(engine: Engine, tmp_path: Path) -> None:
    import_transcripts(engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="vectors", n=10, k=3)
    sel = Selection()
    t1 = tables.table1(engine, sel)
    assert tables.table1(engine, sel) is t1  # cached
    with db_session(engine) as db:
        run = db.exec(select_one(Run)).first()
        assert run is not None
        inst = Instance(dataset_id=1, key="new", ordinal=99)
        db.add(inst)
        db.flush()
        s = Session(run_id=run.id or 0, instance_id=inst.id or 0, ordinal=99, status="open")
        db.add(s)
        db.flush()
        sid = s.id
    t2 = tables.table1(engine, sel)
    assert t2 is not t1 and t2.total_sessions == 3  # open sessions are not counted
    with db_session(engine) as db:
        for j, (sender, tag) in enumerate([("machine", "INIT"), ("human", "RATIFY"), ("machine", "RATIFY")], 1):
            db.add(Message(session_id=sid or 0, j=j, sender=sender, receiver="x", tag=tag))
    with engine.begin() as c:
        c.execute(update(Session.__table__).where(Session.__table__.c.id == sid)  # type: ignore[attr-defined]
                  .values(status="finished", updated_at=datetime.now(UTC)))
    t3 = tables.table1(engine, sel)
    assert t3.total_sessions == 4 and t3.metrics["two_way"].count == 3
    with engine.begin() as c:
        c.execute(update(Session.__table__).where(Session.__table__.c.id == sid)  # type: ignore[attr-defined]
                  .values(status="aborted", updated_at=datetime.now(UTC) + timedelta(seconds=1)))
    t4 = tables.table1(engine, sel)
    assert t4.total_sessions == 4 and t4.aborted_sessions == 1 and t4.metrics["two_way"].count == 2


def select_one(model: type[Any]) -> Any:
    from sqlmodel import select

    return select(model)


# --- Figure 2, LLM costs, agreement -----------------------------------------------------------


def test_figure2_costs_and_agreement(any_engine: Engine) -> None:
    truth = build_random(any_engine, seed=3, experiments=1, reps=3, sessions=12)
    exp_id = next(iter(truth))
    with db_session(any_engine) as db:
        runs = list(db.exec(select_one(Run).where(Run.experiment_id == exp_id)).all())
        for run in runs:
            for after in range(0, 4):
                acc = 0.2 * after / run.repetition
                db.add(Evaluation(run_id=run.id or 0, after_session=after, split="test", prediction_accuracy=acc,
                                  explanation_accuracy=acc / 2, both_accuracy=acc / 4, instances=10))
            db.add(Evaluation(run_id=run.id or 0, after_session=0, split="val", prediction_accuracy=1.0,
                              explanation_accuracy=1.0, both_accuracy=1.0, instances=5))
        sid = truth[exp_id][1][0]["id"]
        for i, cost in enumerate([0.01, 0.02, None]):
            db.add(LLMCall(experiment_id=exp_id, run_id=runs[0].id, session_id=sid, j=1, provider="anthropic",
                           model="claude", purpose="ask", tokens_in=100, tokens_out=10 * i, latency_ms=100.0 * i,
                           cost_usd=cost, error="boom" if i == 2 else None))
        db.add(LLMCall(experiment_id=exp_id, provider="anthropic", model="claude", purpose="eval", tokens_in=5,
                       latency_ms=4.0))
    ev = performance.evaluations(any_engine, Selection(experiments=(exp_id,)))
    assert len(ev) == 12
    med = performance.performance_median(ev)
    row = med[med.after_session == 3].iloc[0]
    assert row["prediction"] == pytest.approx(0.6 / 2)  # median of 0.6, 0.3, 0.2
    assert row["prediction_min"] == pytest.approx(0.2) and row["prediction_max"] == pytest.approx(0.6)
    assert len(performance.evaluations(any_engine, Selection(experiments=(exp_id,)), split="val")) == 3
    data = figures.figure2(ev)["data"]["values"]
    runs, meds = data[data.kind == "repetition"], data[data.kind == "median"]
    assert len(runs.groupby(["repetition", "curve"])) == 3 * 3  # per repetition and metric
    # the thick lines are the medians: at session 3, prediction's is the median over the repetitions
    at3 = meds[(meds.after_session == 3) & (meds.curve == "prediction")]
    assert at3.accuracy.tolist() == [pytest.approx(0.6 / 2)]

    per_session = costs.llm_costs(any_engine, Selection(experiments=(exp_id,)))
    status = {s["id"]: s["status"] for ss in truth[exp_id].values() for s in ss}
    if status[sid] == "open":
        assert per_session.empty
    else:
        r = per_session.iloc[0]
        assert (r["calls"], r["tokens_in"], r["tokens_out"], r["errors"]) == (3, 300, 30, 1)
        assert r["cost_usd"] == pytest.approx(0.03) and r["latency_ms"] == pytest.approx(300.0)
    summ = costs.llm_summary(any_engine, Selection(experiments=(exp_id,)))
    assert dict(zip(summ.purpose, summ.calls, strict=True)) == {"ask": 3, "eval": 1}

    # agreement: κ over instances annotated by both h1 and h2 (earliest session each), from the truth
    earliest: dict[tuple[str, int], tuple[int, list[Tag]]] = {}
    inst_of = {}
    for ss in truth[exp_id].values():
        for o, s in enumerate(ss):
            inst_of[s["id"]] = o
            human = [t for snd, t in s["tags"] if snd is Sender.HUMAN]
            if s["status"] == "open" or not s["annotator"] or not human:
                continue
            key = (s["annotator"], o)
            if key not in earliest or s["id"] < earliest[key][0]:
                earliest[key] = (s["id"], human)
    for which, pick in (("first", 0), ("last", -1)):
        shared = sorted({o for a, o in earliest if a == "h1"} & {o for a, o in earliest if a == "h2"})
        want = [(earliest[("h1", o)][1][pick].value, earliest[("h2", o)][1][pick].value) for o in shared]
        ag = agreement.agreement(any_engine, Selection(experiments=(exp_id,)), which=which)
        if not want:
            assert ag == []
            continue
        (a,) = ag
        assert (a.annotator_a, a.annotator_b, a.pairs) == ("h1", "h2", want)
        assert a.kappa == cohen_kappa(want)
        assert a.observed == pytest.approx(sum(x == y for x, y in want) / len(want))


def test_annotators_side_by_side_from_transcripts(any_engine: Engine, tmp_path: Path) -> None:
    """Live/imported DRUG-h1 vs DRUG-h2: the same instances annotated by two humans, split into
    columns by Session.annotator_id → Annotator.name, with κ on their tags."""
    lines = []
    plan = {  # instance: (h1's session, h2's session)
        "a": (VECTORS["v1"], VECTORS["v1"]),
        "b": (VECTORS["v2"], VECTORS["v4"]),
        "c": (VECTORS["v4"], VECTORS["v4"]),
    }
    for inst, pair in plan.items():
        for ann, tags in zip(("h1", "h2"), pair, strict=True):
            preds = fit_content(tags, ("CCO", "CC(=O)O", "c1ccccc1O", "CCN"))
            for j, ((sender, tag), pred) in enumerate(zip(tags, preds, strict=True), start=1):
                lines.append(json.dumps({"session": f"{inst}-{ann}", "instance": inst, "j": j, "sender": sender,
                                         "tag": tag, "annotator": ann, "prediction": pred,
                                         "explanation": f"{ann} on {inst}"}))
    path = tmp_path / "live.jsonl"
    path.write_text("\n".join(lines) + "\n")
    import_transcripts(any_engine, path, name="DRUG-live", n=10, k=3, task="drug")
    by = tables.table1_by(any_engine, Selection(), "annotator")
    assert sorted(by) == ["h1", "h2"]
    h1, h2 = by["h1"].as_json("h1"), by["h2"].as_json("h2")
    assert h1["total_sessions"] == h2["total_sessions"] == 3
    assert h1["metrics"]["two_way"]["count"] == 2 and h2["metrics"]["two_way"]["count"] == 1
    assert h1["metrics"]["ultra_strong_machine"]["count"] == 1 and h2["metrics"]["ultra_strong_machine"]["count"] == 0
    (ag,) = agreement.agreement(any_engine, Selection(), which="first")
    assert ag.pairs == [("RATIFY", "RATIFY"), ("REFUTE", "REFUTE"), ("REFUTE", "REFUTE")]
    assert ag.kappa == pytest.approx(1.0)
    (ag,) = agreement.agreement(any_engine, Selection(), which="last")
    assert ag.pairs == [("RATIFY", "RATIFY"), ("RATIFY", "REJECT"), ("REJECT", "REJECT")]
    assert ag.kappa == pytest.approx(cohen_kappa(ag.pairs))
    assert ag.observed == pytest.approx(2 / 3)
    # the annotator filter selects one human's sessions
    opts = queries.options(any_engine)
    h2_id = next(a["id"] for a in opts.annotators if a["name"] == "h2")
    assert tables.table1(any_engine, Selection(annotators=(h2_id,))).as_json("x")["metrics"] == h2["metrics"]


def test_dataset_filter_and_columns(any_engine: Engine) -> None:
    a = build_random(any_engine, seed=21, experiments=1, annotators="a")
    b = build_random(any_engine, seed=22, experiments=1, annotators="b")
    ds = {d["name"]: d["id"] for d in queries.options(any_engine).datasets}
    (per_a,), (per_b,) = a.values(), b.values()
    got = tables.table1(any_engine, Selection(datasets=(ds["rand-21"],)), n=10).as_json("x")
    assert got == reference(per_a, 10)
    by = tables.table1_by(any_engine, Selection(), "dataset", n=10)
    assert by["rand-21"].as_json("x") == reference(per_a, 10)
    assert by["rand-22"].as_json("x") == reference(per_b, 10)
    by_exp = tables.table1_by(any_engine, Selection(), "experiment", n=10)
    assert by_exp["exp22-0"].as_json("x") == reference(per_b, 10)


def test_per_session_flags_export_round_trips(engine: Engine, tmp_path: Path) -> None:
    import io

    import pandas as pd

    import_transcripts(engine, write_vectors(tmp_path / "v.jsonl", VECTORS), name="vectors", n=10, k=3)
    df = tables.session_frame(engine, Selection())
    back = pd.read_parquet(io.BytesIO(tables.to_parquet(df)))
    assert back[["session_id", *METRICS]].equals(df[["session_id", *METRICS]])
    assert back["two_way"].tolist() == [True, True, False]
    assert back["instance"].tolist() == ["case-v1", "case-v2", "case-v4"]
    csv_back = pd.read_csv(io.StringIO(df.to_csv(index=False)))
    assert csv_back["ultra_strong_machine"].tolist() == [False, True, False]
