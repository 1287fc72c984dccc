"""Bad input files, one family at a time: each is one line naming the file, the line or field
and what to do, a non-zero exit, and nothing written (README, "Errors")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import Session as DB
from sqlmodel import select
from typer.testing import CliRunner

from pxp.cli.main import app
from pxp.data.importers.common import ImportProblems
from pxp.protocols.pxp.rules import Tag
from pxp.storage.store import get_engine
from pxp.storage.tables import Dataset, Experiment, Instance, Message

runner = CliRunner()


def pxp(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def counts(url: str) -> tuple[int, ...]:
    with DB(get_engine(url)) as db:
        return tuple(int(db.exec(select(func.count()).select_from(t)).one()) for t in (Dataset, Instance, Experiment,
                                                                                       Message))


def errors(res: Any) -> list[str]:
    assert "Traceback" not in res.output and "╭" not in res.output
    return [x for x in res.output.splitlines() if x.strip()]


# --- transcripts -------------------------------------------------------------------------

INIT = {"session": "s", "instance": "x", "j": 1, "sender": "machine", "tag": "INIT", "prediction": "Pneumonia",
        "explanation": "e"}
REPLY = {"session": "s", "instance": "x", "j": 2, "sender": "human", "tag": "REFUTE", "prediction": "Atelectasis",
         "explanation": "mine"}


def _lines(*recs: dict[str, Any] | str) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in recs) + "\n"


@pytest.mark.parametrize(("content", "opts", "why"), [
    (_lines(INIT, {**REPLY, "j": 2.5}), [], "t.jsonl:2: j must be a whole number of at least 1, got the number 2.5"),
    (_lines(INIT, {**REPLY, "j": "2"}), [], "t.jsonl:2: j must be a whole number of at least 1, got '2'"),
    (_lines(INIT, {**REPLY, "prediction": None}), [], 't.jsonl:2: prediction must be a JSON string ("" for none), '
     "got null"),
    (_lines(INIT, {**REPLY, "prediction": ["Atelectasis"]}), [], "t.jsonl:2: prediction must be a JSON string"),
    (_lines(INIT, {**REPLY, "explanation": 42}), [], "t.jsonl:2: explanation must be a JSON string"),
    (_lines(INIT, {**REPLY, "session": {"id": 1}}), [], "t.jsonl:2: session must be a non-empty string or a whole "
     "number, got an object"),
    (_lines(INIT, {**REPLY, "agree": "maybe"}), [], "t.jsonl:2: agree must be true, false or null, got 'maybe'"),
    (_lines(INIT, {**REPLY, "repetition": 0}), [], "t.jsonl:2: repetition must be a whole number of at least 1"),
    (_lines(INIT, '{"session": "s", "session": "t", "instance": "x", "j": 2, "sender": "h", "tag": "REFUTE"}'), [],
     "t.jsonl:2: the key 'session' appears twice"),
    (_lines(INIT, '{"session": "s", "instance": "x", "j": 2, "sender": "h", "tag": "REFUTE", "agree": NaN}'), [],
     "t.jsonl:2: NaN is not a JSON number"),
    (_lines(INIT, {**REPLY, "predicton": "x"}), [], "t.jsonl:2: unknown field 'predicton'; a transcript line has"),
    (_lines(INIT, {**REPLY, "receiver": "human"}), [], "t.jsonl:2: receiver 'human' is not the other agent (machine)"),
    (_lines(INIT, REPLY), ["--task", "foo"], "--task: unknown task 'foo' for transcripts; use one of rad, drug, text"),
    (_lines(INIT, REPLY), ["--k", "11"], "--k: k must be at most the message bound n = 10, got 11"),
    (_lines(INIT, REPLY), ["--n", "1"], "--n: the message bound n must be at least 2, got 1"),
    (_lines(INIT, REPLY), ["--k", "0"], "--k: k must be at least 1, got 0"),
    (_lines(INIT, REPLY), ["--n", "5000"], "--n: the message bound n must be at most 1000"),
    (_lines(INIT, {**REPLY, "prediction": "Fracture"}), ["--task", "rad"],
     "t.jsonl:2: prediction Fracture is not one of the RAD labels"),
    (_lines({**INIT, "prediction": "CCO"}, {**REPLY, "prediction": "C1CC"}), ["--task", "drug"],
     "t.jsonl:2: prediction is not a reactant set: not a valid SMILES: 'C1CC'"),
    (_lines({**INIT, "prediction": "CCO"}, {**REPLY, "prediction": ""}), ["--task", "drug"],
     "t.jsonl:2: prediction is not a reactant set: no SMILES given"),
    (_lines(INIT, {**REPLY, "tag": "RATIFY", "prediction": "Pneumonia", "match": False}), ["--task", "rad"],
     "t.jsonl:2: match is false in the file but MATCH over the predictions gives true"),
    (_lines(INIT, REPLY, {**INIT, "j": 3, "tag": "REVISE"}), ["--n", "3"],
     "t.jsonl:3: tagged REVISE but the machine's answer is the same as its message 1"),
    (_lines(INIT, REPLY, {**INIT, "j": 3, "tag": "REFUTE", "explanation": "edited", "changed": False}), ["--n", "3"],
     "t.jsonl:3: changed is false in the file but the machine's answer differs from its message 1"),
    (_lines(INIT, {**REPLY, "prediction": "x" * (64 * 1024 + 1)}), [],
     "t.jsonl:2: prediction is 65,537 characters, over the 65,536-character limit for a text field"),
    # the text rule (docs/development.md "The text rule"), the same on SQLite and PostgreSQL
    (_lines(INIT, {**REPLY, "explanation": "mine\u0000"}), [],
     "t.jsonl:2: explanation: contains the control character U+0000 (NUL); remove it"),
    (_lines(INIT, {**REPLY, "prediction": "Atel\nectasis"}), [], "t.jsonl:2: prediction: contains the control"),
])
def test_bad_transcripts_are_one_line_and_store_nothing(db_url: str, tmp_path: Path, content: str,
                                                         opts: list[str], why: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(content)
    before = counts(db_url)
    res = pxp("--db", db_url, "import", "transcripts", str(f), "--name", "t", *opts)
    assert res.exit_code == 1
    lines = errors(res)
    assert len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], res.output
    assert counts(db_url) == before


def test_a_good_transcript_is_still_imported_with_facts_from_content(db_url: str, tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(_lines(INIT, {**REPLY, "session": "s", "agree": True},
                        {**INIT, "j": 3, "tag": "REFUTE", "agree": True}))
    res = pxp("--db", db_url, "import", "transcripts", str(f), "--name", "t", "--task", "rad", "--n", "3")
    assert res.exit_code == 0, res.output
    with DB(get_engine(db_url)) as db:
        facts = [(m.j, m.match, m.agree, m.changed) for m in db.exec(select(Message).order_by(Message.j)).all()]
    assert facts == [(1, None, None, None), (2, False, True, False), (3, False, True, False)]


def test_a_transcript_label_with_a_zero_width_space_is_that_label(any_engine: Any, tmp_path: Path) -> None:
    """A RATIFY of `Pneumonia`+ZWSP: the prediction is stored as the label, and MATCH over the content says so."""
    url = any_engine.url.render_as_string(hide_password=False)
    f = tmp_path / "t.jsonl"
    f.write_text(_lines(INIT, {**REPLY, "tag": "RATIFY", "prediction": "Pneu\u200bmonia", "agree": True},
                        {**INIT, "j": 3, "tag": "RATIFY", "agree": True}))
    res = pxp("--db", url, "import", "transcripts", str(f), "--name", "t", "--task", "rad", "--n", "3")
    assert res.exit_code == 0, res.output
    with DB(any_engine) as db:
        m = db.exec(select(Message).where(Message.j == 2)).one()
    assert (m.prediction, m.match, m.tag) == ("Pneumonia", True, Tag.RATIFY)


# --- CSV / JSONL -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "content", "why"), [
    ("d.csv", "input,label,label\na,b,c\n", "d.csv:1: column 'label' appears twice in the header"),
    ("d.csv", "input,label,explanation\na,b\n", "d.csv:2: 2 fields but the header has 3; every row needs one"),
    ("d.csv", "input,label\na,b,c\n", "d.csv:2: 3 fields but the header has 2"),
    ("d.jsonl", '{"input": "a", "label": true}\n', "d.jsonl:1: field 'label' must be text or a number, got a boolean"),
    ("d.jsonl", '{"input": ["a"]}\n', "d.jsonl:1: field 'input' must be text or a number, got an array"),
    ("d.jsonl", '{"input": {"a": 1}}\n', "d.jsonl:1: field 'input' must be text or a number, got an object"),
    ("d.jsonl", '{"input": "a", "label": NaN}\n', "d.jsonl:1: NaN is not a JSON number"),
    ("d.jsonl", '{"input": "a", "label": Infinity}\n', "d.jsonl:1: Infinity is not a JSON number"),
    ("d.jsonl", '{"input": "a", "input": "b"}\n', "d.jsonl:1: the key 'input' appears twice"),
    # after the object only JSON's whitespace (space, tab, CR, LF); a no-break space is more data
    ("d.jsonl", '{"input": "a"}\u00a0\n', "d.jsonl:1: not valid JSON (Extra data)"),
    ("d.jsonl", '{"input": "a"} {"input": "b"}\n', "d.jsonl:1: not valid JSON (Extra data)"),
    ("d.jsonl", '[{"input": "a"}]\n', "d.jsonl:1: expected a JSON object {...}, got an array"),
    pytest.param("d.jsonl", '{"input": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "d.jsonl:1: not valid JSON here "
                 "(arrays or objects nested too deeply to read)", id="jsonl-nested-100000-deep"),
    ("d.jsonl", json.dumps({"key": "k" * 301, "input": "a"}) + "\n", "longer than the 300 characters a key may have"),
    ("d.csv", "input,label\n" + "x" * (64 * 1024 + 1) + ",b\n", "d.csv:2: a field is longer than the "
     "65,536-character limit for a text field"),
])
def test_bad_tables_are_one_line_and_store_nothing(db_url: str, tmp_path: Path, name: str, content: str,
                                                   why: str) -> None:
    f = tmp_path / name
    f.write_text(content)
    before = counts(db_url)
    res = pxp("--db", db_url, "import", "csv" if name.endswith(".csv") else "jsonl", str(f))
    assert res.exit_code == 1
    lines = errors(res)
    assert len(lines) == 1 and why in lines[0], res.output
    assert counts(db_url) == before


def test_jsonl_lines_with_json_whitespace_around_the_object_are_read(db_url: str, tmp_path: Path) -> None:
    f = tmp_path / "w.jsonl"
    f.write_bytes(b'  {"key": "a", "input": "x"}\t \r\n{"key": "b", "input": "y"}\n\n \n{"key": "c", "input": "z"}')
    res = pxp("--db", db_url, "import", "jsonl", str(f))
    assert res.exit_code == 0, res.output
    with DB(get_engine(db_url)) as db:
        assert sorted(i.key for i in db.exec(select(Instance))) == ["a", "b", "c"]


def test_an_empty_rad_label_is_refused(db_url: str, tmp_path: Path) -> None:
    from PIL import Image

    Image.new("L", (64, 64)).save(tmp_path / "a.png")
    f = tmp_path / "r.csv"
    f.write_text("image,label\na.png,\n")
    res = pxp("--db", db_url, "import", "csv", str(f), "--task", "rad")
    assert res.exit_code == 1 and "r.csv:2: empty label in column 'label'" in errors(res)[0]
    assert counts(db_url) == (0, 0, 0, 0)


def test_reimporting_never_changes_an_instance_a_session_refers_to(db_url: str) -> None:
    from pxp.data.importers.common import NewInstance
    from pxp.data.importers.stage import store_instances
    from pxp.running.pxp.live.assignment import claim_next, create_live_experiment, ensure_annotator
    from tests.factories import make_rad

    engine = get_engine(db_url)
    make_rad(engine, per_label=1)
    eid = create_live_experiment(engine, dataset="toy-rad")
    sid = claim_next(engine, experiment_id=eid, annotator_id=ensure_annotator(engine, name="r"))
    assert sid is not None
    with DB(engine) as db:
        from pxp.storage.tables import Session

        used = db.exec(select(Instance).join(Session, Session.instance_id == Instance.id)).one()  # type: ignore[arg-type]
    other = "Pneumonia" if used.label != "Pneumonia" else "Atelectasis"
    item = NewInstance(key=used.key, label=other, reference_prediction=other)
    with pytest.raises(ImportProblems) as info:
        store_instances(engine, name="toy-rad", task="rad", items=[item])
    assert info.value.problems == [f"dataset 'toy-rad': key {used.key!r} already holds other content, and stored "
                                   "sessions were run on it; import under a new --name (a new version of the "
                                   "dataset)"]
    with DB(engine) as db:
        again = db.get(Instance, used.id)
        assert again is not None and again.label == used.label
    # the same content again, or under a new name, is fine
    assert store_instances(engine, name="toy-rad-v2", task="rad", items=[item]).added == 1


# --- DICOM -------------------------------------------------------------------------------


def _dicom_folder(tmp_path: Path) -> Path:
    from tests.data.test_data_dicom import make_dicom

    folder = tmp_path / "scans"
    folder.mkdir()
    make_dicom(folder / "a.dcm")
    make_dicom(folder / "b.dcm")
    return folder


@pytest.mark.parametrize(("labels", "extra", "why"), [
    ("file,label\na.dcm,Pneumonia\nb.dcm,Atelectasis\nc.dcm,Pneumonia\n", [],
     "labels.csv:4: no file 'c.dcm' in scans; fix the path or drop the row"),
    ("file,label\na.dcm,Pneumonia\nb.dcm,Atelectasis\na.dcm,Cardiomegaly\n", [],
     "labels.csv:4: file 'a.dcm' is also on line 2; list each file once"),
    ("file,label\na.dcm,Pneumonia\nb.dcm,Atelectasis\n", ["--label", "Pneumonia"],
     "give --label (one label for every image) or --labels (a CSV), not both"),
])
def test_bad_dicom_labels_are_one_line_and_store_nothing(db_url: str, tmp_path: Path, labels: str,
                                                         extra: list[str], why: str) -> None:
    folder = _dicom_folder(tmp_path)
    (tmp_path / "labels.csv").write_text(labels)
    before = counts(db_url)
    res = pxp("--db", db_url, "import", "dicom", str(folder), "--labels", str(tmp_path / "labels.csv"), *extra)
    assert res.exit_code == 1
    lines = errors(res)
    assert len(lines) == 1 and why in lines[0], res.output
    assert counts(db_url) == before


def test_a_zip_without_dicom_names_the_zip(db_url: str, tmp_path: Path) -> None:
    import zipfile

    z = tmp_path / "empty-scans.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("readme.txt", "no images here")
    res = pxp("--db", db_url, "import", "dicom", str(z))
    assert res.exit_code == 1 and "empty-scans.zip: no DICOM files found" in errors(res)[-1]
    assert "pxp-dicom-" not in res.output and counts(db_url) == (0, 0, 0, 0)


# --- task configs ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "content", "why"), [
    ("t.toml", 'name = "t"\n[prompts]\ninstance = "Case of {patient}"\n',
     "prompts.instance: unknown placeholder {patient}; this template may use {payload}, {labels}"),
    ("t.toml", 'name = "t"\n[prompts]\ninstance = "Case {payload!r}"\n',
     "prompts.instance: malformed or unclosed placeholder '{payload!r}'"),
    ("t.toml", 'name = "t"\n[prompts]\ninstance = "Case {} {payload}"\n', "malformed or unclosed placeholder '{}"),
    ("t.toml", 'name = "t"\n[prompts]\ninstance = "Case {payload"\n', "malformed or unclosed placeholder '{payload'"),
    ("t.toml", 'name = "t"\n[prompts]\nsystem = "Answer {payload}"\n',
     "prompts.system: unknown placeholder {payload}; this template may use {labels}, {format}"),
    ("t.toml", 'name = "t"\n[prompts]\ninstance = "What is it?"\n', "no {payload}, so the case is never sent"),
    ("t.toml", 'name = "t"\nmatch = "label"\nlabels = ["a", " "]\n', "labels: label 2 is empty"),
    # typed as declared (docs/research.md, Task configs): a string is not a boolean nor a number
    ("t.toml", 'name = "t"\nimage = "yes"\n', "t.toml: task config: line 2: image: Input should be a valid boolean"),
    ("t.json", '{"name": "t",\n "max_tokens": "30"}', "t.json: task config: line 2: max_tokens: Input should be"),
    ("t.toml", 'name = "t"\n[fields]\nprediction = ""\n', "line 3: fields.prediction: Value error, must not be empty"),
    ("t.toml", 'name = "t"\nmatch = "label"\nlabels = ["Pneumonia", "Pneu\u200bmonia"]\n', "labels must be distinct"),
    ("t.toml", 'name = "RAD"\n', "name: 'RAD' is a built-in task; choose another name"),
    ("t.toml", 'name = "t"\nmatch = "label"\nlabels = ["a", "b"]\n[[few_shot]]\ninput = "x"\nprediction = "c"\n',
     "few_shot[1].prediction: 'c' is not one of the labels (a, b)"),
    ("t.yaml", 'name: t\n', "t.yaml: a task config is a .toml or .json file, not .yaml"),
])
def test_bad_task_configs_are_one_line(db_url: str, tmp_path: Path, name: str, content: str, why: str) -> None:
    f = tmp_path / name
    f.write_text(content)
    res = pxp("--db", db_url, "task", "check", str(f))
    assert res.exit_code == 1
    lines = errors(res)
    assert len(lines) == 1 and why in lines[0], res.output


def test_a_task_config_with_a_byte_order_mark_is_read(db_url: str, tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_bytes(b'\xef\xbb\xbfname = "t"\nmatch = "label"\nlabels = ["a", "b"]\n')
    assert pxp("--db", db_url, "task", "check", str(f)).exit_code == 0


def test_a_label_task_is_not_attached_to_a_smiles_dataset(db_url: str, tmp_path: Path) -> None:
    from tests.factories import make_drug

    make_drug(get_engine(db_url))
    f = tmp_path / "t.toml"
    f.write_text('name = "t"\nmatch = "label"\nlabels = ["a", "b"]\n')
    res = pxp("--db", db_url, "task", "attach", str(f), "--dataset", "toy-drug")
    assert res.exit_code == 1
    assert "dataset 'toy-drug' holds SMILES (task drug); task 't' needs match = 'smiles'" in errors(res)[0]
    with DB(get_engine(db_url)) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == "toy-drug")).one()
        assert "task_config" not in (ds.config or {})


def test_rad_labels_come_from_the_task(db_url: str, tmp_path: Path) -> None:
    """docs/operations.md, Importing data: a rad label outside the task's set (the study's five, or --labels)
    is refused with its line and the set named; a label in another case or spacing is the set's own; an empty
    or null label is refused (a rad case needs one)."""
    from PIL import Image

    Image.new("L", (64, 64)).save(tmp_path / "a.png")
    f = tmp_path / "r.csv"
    f.write_text("image,label\na.png,Pneumonia\na.png,Banana\n")
    res = pxp("--db", db_url, "import", "csv", str(f), "--task", "rad")
    assert res.exit_code == 1 and errors(res) == [
        "error: r.csv:3: label 'Banana' is not one of the task's labels (Atelectasis, Pneumonia, Pleural "
        "Effusion, Cardiomegaly, Pneumothorax); give the dataset's set with --labels"]
    assert counts(db_url) == (0, 0, 0, 0)
    res = pxp("--db", db_url, "import", "csv", str(f), "--task", "rad", "--labels", "Banana,pneumonia,Apple")
    assert res.exit_code == 0, res.output
    with DB(get_engine(db_url)) as db:
        from pxp.storage.tables import Dataset, Instance

        assert db.exec(select(Dataset)).one().config["labels"] == ["Banana", "pneumonia", "Apple"]
        assert [i.label for i in db.exec(select(Instance).order_by(Instance.ordinal)).all()] == ["pneumonia", "Banana"]
    j = tmp_path / "n.jsonl"
    j.write_text('{"image": "a.png", "label": "PLEURAL  effusion"}\n{"image": "a.png", "label": null}\n')
    res = pxp("--db", db_url, "import", "jsonl", str(j), "--task", "rad")
    assert res.exit_code == 1 and "n.jsonl:2: empty label" in errors(res)[0], res.output


def test_empty_predictions_of_a_text_task_are_never_silent(db_url: str, tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"input": "a", "prediction": "x"}\n{"input": "b", "prediction": ""}\n'
                 '{"input": "c", "prediction": null}\n')
    res = pxp("--db", db_url, "import", "jsonl", str(f), "--task", "text")
    assert res.exit_code == 0, res.output
    assert ("t.jsonl: 2 row(s) have no prediction (lines 2, 3): a person can annotate them, but the database "
            "proxy has no answer for them") in " ".join(res.stderr.split())


@pytest.mark.postgres
def test_two_imports_of_one_name_at_once_give_one_dataset_or_one_clear_line(pg_engine: Any,
                                                                            tmp_path: Path) -> None:
    """Two imports race for a new dataset name: one creates it; the other either updates it after (the same
    rows: nothing added) or, when the name was taken between its check and its write, says so in one line."""
    import threading

    from pxp.data.importers.generic import import_table

    f = tmp_path / "race.csv"
    f.write_text("key,input\n" + "".join(f"k{i},text {i}\n" for i in range(3000)))
    outcomes: list[str] = []

    def one() -> None:
        try:
            import_table(pg_engine, f, task="text", name="raced")
            outcomes.append("ok")
        except ImportProblems as err:
            outcomes.append(str(err))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "ok" in outcomes
    for o in outcomes:
        assert o == "ok" or o == ("dataset 'raced' was created by another import meanwhile; nothing of "
                                  f"{f} was stored: import it again (it then updates that dataset) or choose "
                                  "another --name"), o
    with DB(pg_engine) as db:
        from pxp.storage.tables import Dataset, Instance

        assert len(db.exec(select(Dataset)).all()) == 1 and len(db.exec(select(Instance)).all()) == 3000


def test_an_excel_sep_line_is_recognised(db_url: str, tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("sep=,\ninput,label\na,b\n")
    res = pxp("--db", db_url, "import", "csv", str(f), "--name", "x")
    assert res.exit_code == 0 and "1 instances" in res.stdout, res.output
    f.write_text("sep=;\ninput;label\na;b\n")
    res = pxp("--db", db_url, "import", "csv", str(f), "--name", "y")
    assert res.exit_code == 1 and errors(res) == [
        "error: x.csv:1: an Excel 'sep=;' line: this file's fields are separated by ';'; save it as CSV (comma "
        "delimited)"]
