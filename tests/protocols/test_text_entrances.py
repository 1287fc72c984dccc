"""The one text rule at every entrance (docs/development.md "The text rule"): for random strings with
zero-width, bidi, space and combining characters inserted, each entrance stores the value the rule gives
(the same as for the visible string) or refuses it in one line; none keeps a private variant."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlmodel import select

from pxp.agents.browser import clean_answer
from pxp.data.importers.generic import import_table
from pxp.protocols.text import TextRefused, clean_name
from pxp.running.pxp.config import RunConfig, RunError
from pxp.running.pxp.experiments import create_experiment
from pxp.storage.store import db_session
from pxp.storage.tables import Dataset, Instance
from pxp.tasks.rad import rad_spec
from pxp.team.access import TeamError, _key
from tests.factories import make_rad

INSERTS = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u200e", "\u202e", "\u2066", "\u00a0", "\u3000", "\u0301"]
_visible = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=10)


_n = itertools.count()


def _sprinkle(text: str, seed: int, k: int) -> str:
    rnd = random.Random(seed)
    for ch in rnd.choices(INSERTS, k=k):
        at = rnd.randint(1, len(text))
        text = text[:at] + ch + text[at:]
    return text


def _ruled(text: str) -> str | None:
    try:
        return clean_name(text)
    except TextRefused:
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_visible, st.integers(0, 2**32), st.integers(0, 4))
def test_every_entrance_gives_the_rule_s_value(tmp_path: Path, engine: Engine, word: str, seed: int, k: int) -> None:
    typed = _sprinkle(word, seed, k)
    expected = _ruled(typed)
    n = next(_n)
    # the team table: an email with an invisible character is refused (it could never log in), a plain one kept
    try:
        stored = _key(f"{typed}@example.org", "email").text
        assert stored == f"{expected}@example.org".lower()
    except TeamError as err:
        assert any(why in str(err) for why in ("may not contain", "is not an email", "markup", "mixes"))
    # the expert's typed answer and a provider's reply: the same value
    answer, problem = clean_answer(typed, "because")
    assert problem is None and answer.prediction == expected
    spec = rad_spec(labels=[expected or "x"])
    y, _ = spec.parse(json.dumps({"prediction": typed, "explanation": "e"}))
    assert y == (expected or "x")
    # an importer's key (CSV), and an experiment's name
    f = tmp_path / f"t{n}.csv"
    quoted = '"' + typed.replace('"', '""') + '"'
    f.write_text(f"key,input\n{quoted},x\n", encoding="utf-8")
    res = import_table(engine, f, task="text", name=f"d{n}")
    with db_session(engine) as db:
        ds = db.exec(select(Dataset).where(Dataset.name == res.dataset)).one()
        assert [i.key for i in db.exec(select(Instance).where(Instance.dataset_id == ds.id)).all()] == [expected]
    make_rad(engine, name=f"r{n}", per_label=1)
    try:
        exp = create_experiment(engine, RunConfig(dataset=f"r{n}"), name=f"{typed}-{n}")
        assert exp.name == clean_name(f"{typed}-{n}")
    except RunError as err:  # a word mixing Latin, Cyrillic or Greek (the identity rule)
        assert "mixes" in str(err) and "\n" not in str(err)
