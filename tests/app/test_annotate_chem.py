"""The chemist's workstation (docs/annotating.md, "Drawing the reactants"): the Draw button of the DRUG
reply form shows the molecule editor made (hidden) with the case, pre-filled with the field's reactants
or the machine's, and every proposed step with valid SMILES,
the chemist's as the machine's, is drawn under its message. Ketcher's Apply is driven in a real
browser (tests/browser/test_browser_chem.py)."""

from __future__ import annotations

import json

from rdkit import Chem
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from pxp.data.chem import smiles_set
from tests.app.test_app import all_msgs, app_db, by_suffix, current, login, new_app, ok, texts
from tests.factories import make_drug

__all__ = ["app_db"]  # the fixture, shared with test_app


def _editors(at: AppTest) -> int:
    """How many Ketcher editors the page holds (custom components, by their name)."""
    return sum("annotate.ketcher" in str(getattr(c.proto, "component_name", ""))
               for c in at.get("component_instance"))


def _ketcher(at: AppTest) -> tuple[str, str]:
    """The editor's (key, pre-fill)."""
    (c,) = [c for c in at.get("component_instance")
            if "annotate.ketcher" in str(getattr(c.proto, "component_name", ""))]
    return c.proto.id, str(c.proto.json_args)


def _shown(at: AppTest) -> bool:
    """Whether the editor's box is styled over the window (else hidden off screen)."""
    return any("inset: 0" in str(getattr(h.proto, "body", "")) for h in at.get("html"))


def test_the_editor_is_made_with_the_case_and_drawn_steps_are_shown(app_db: tuple[str, Engine]) -> None:
    _, engine = app_db
    make_drug(engine)
    at = login(new_app("annotate"), "toy-drug")
    sid, msgs = current(engine)
    draw = by_suffix(at.button, "_draw")
    assert draw.label == "Draw" and draw.proto.shortcut == "alt+m"
    assert _editors(at) == 1 and not _shown(at), "Ketcher made hidden with the case"
    first, args = _ketcher(at)
    given = json.loads(args)  # pre-filled with the machine's, as a molfile Ketcher reads without Indigo
    assert given["default"] == msgs[0].prediction and given["molecule_format"] == "SMILES"
    assert smiles_set(Chem.MolToSmiles(Chem.MolFromMolBlock(given["molecule"]))) == smiles_set(msgs[0].prediction)
    at.run()
    assert _ketcher(at)[0] == first, "a rerun keeps the editor"
    by_suffix(at.text_input, "_pred").input("CCO.OC(=O)c1ccccc1").run()
    ok(at)
    key, args = _ketcher(at)
    assert key != first and "CCO.OC(=O)c1ccccc1" in args, "other reactants in the field: a new editor with them"
    by_suffix(at.text_input, "_pred").input("OC(=O)c1ccccc1.OCC").run()
    assert _ketcher(at)[0] == key, "the same molecules: the same editor"
    by_suffix(at.text_input, "_pred").input("OC(=O)c1ccccc1.OC(").run()
    assert _ketcher(at)[0] == key, "a field RDKit cannot read (yet, as it is typed): the editor there is"
    by_suffix(at.text_input, "_pred").input("OC(=O)c1ccccc1.OCC").run()
    assert _ketcher(at)[0] == key
    assert not _shown(at)
    by_suffix(at.button, "_draw").click().run()
    ok(at)
    assert _shown(at) and _ketcher(at)[0] == key
    assert by_suffix(at.button, "_editor_close").proto.shortcut == "escape"
    by_suffix(at.button, "_editor_close").click().run()
    assert not _shown(at)
    assert not [b for b in at.button if b.key.endswith("_editor_close")], "hidden, the editor has no key (Esc)"
    by_suffix(at.button, "_match_no").click().run()
    by_suffix(at.button, "_agree_no").click().run()
    by_suffix(at.text_area, "_expl").input("Fischer esterification of benzoic acid with ethanol.")
    by_suffix(at.button, "_send").click().run()
    ok(at)
    assert all_msgs(engine, sid)[1].prediction == "OC(=O)c1ccccc1.OCC"
    assert _editors(at) == 1 and not _shown(at)
    assert _ketcher(at)[0] == key, "the next reply form, pre-filled with the same molecules: the same editor"
    shown = texts(at)
    assert shown.count("The human's proposed step: reactants → target") == 1
    assert shown.count("The machine's proposed step: reactants → target") == 2
    assert msgs[0].prediction


def test_a_human_smiles_rdkit_cannot_read_stays_text() -> None:
    """An imported transcript may hold a human's SMILES that RDKit cannot read: it is shown as text,
    with no drawing and no warning; the machine's gets its one line why."""

    def page() -> None:
        from pxp.app import ui
        from pxp.protocols.pxp.rules import Msg, Sender, Tag

        for sender in (Sender.HUMAN, Sender.MACHINE):
            ui.show_message(Msg(2, sender, Tag.REFUTE, "C1CC((", "why"), machine_label="m", task_kind="smiles",
                            target="CCO")
        ui.show_message(Msg(3, Sender.HUMAN, Tag.REVISE, "CC=O.CO", "why"), machine_label="m",
                        task_kind="smiles", target="CCOC")

    at = AppTest.from_function(page, default_timeout=60).run()
    ok(at)
    assert [c.value for c in at.code] == ["C1CC((", "C1CC((", "CC=O.CO"]
    assert len(at.warning) == 1 and "SMILES" in at.warning[0].value
    assert [c.value for c in at.caption if "proposed step" in c.value] == [
        "The human's proposed step: reactants → target"]
