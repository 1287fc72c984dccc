"""The chemist's molecule editor in the DRUG reply form (docs/annotating.md, "Drawing the reactants").

Ketcher (streamlit-ketcher: its build and the Indigo toolkit ship in the wheel and are served by the
app's own server) opens in a dialog, and only then: its bundle of about 12 MB is not loaded for a
case nor on a rerun unless the chemist asks for it. Apply puts Ketcher's SMILES into the reactant
field, which checks it with RDKit like typed SMILES.
"""

from __future__ import annotations

import streamlit as st

from pxp.app.annotate.keys import S
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.live.turns import LiveSession

#: opens the editor, also from inside the SMILES field (Alt chords reach Streamlit there)
DRAW_KEY = "Alt+M"
EDITOR_HEIGHT = 430  # the dialog fits a 1280×720 window with Ketcher's Reset and Apply in view


def take_drawn(key: str) -> None:
    """Put the molecule applied in the editor into the reactant field (state `{key}_pred`); called
    before the field is made, in the rerun that closed the editor."""
    drawn = S.pop(f"{key}_drawn", None)
    if drawn is not None:
        S[f"{key}_pred"] = drawn


def draw_button(s: LiveSession, key: str, smiles: str) -> None:
    """The Draw button under the reactant field; pressed (or DRAW_KEY), the editor opens pre-filled
    with `smiles`, or the machine's when that is empty. Kept out of the Tab order
    (pxp.app.annotate.tab_order) so that Tab goes from the prediction to the explanation."""
    if st.button("Draw", key=f"{key}_draw", icon=":material/draw:", type="tertiary", shortcut=DRAW_KEY,
                 help="Draw the reactants in a molecule editor (Ketcher); Apply puts them in the field"):
        S[f"{key}_draw_n"] = S.get(f"{key}_draw_n", 0) + 1  # a fresh editor each time it opens
        S[f"{key}_draw_opened"] = True
        machine = s.last_from(Sender.MACHINE)
        _editor(key, smiles.strip() or (machine.prediction if machine else ""))


@st.dialog("Draw the reactants", width="large", icon=":material/draw:")
def _editor(key: str, smiles: str) -> None:
    """Ketcher, pre-filled. Its only widget is the editor itself, so a rerun of this dialog other
    than the one that opened it is Apply: the SMILES goes to the field and the dialog closes (an
    empty canvas changes nothing)."""
    from streamlit_ketcher import st_ketcher

    opened = S.pop(f"{key}_draw_opened", False)
    st.caption("Draw the reactants (a molecule each), then Apply. Esc closes the editor and leaves "
               "your answer as it was.")
    value = st_ketcher(smiles, molecule_format="SMILES", height=EDITOR_HEIGHT,
                       key=f"{key}_ketcher_{S.get(f'{key}_draw_n', 0)}")
    if opened:
        return
    if not str(value or "").strip():  # an empty canvas, or Apply before Ketcher had loaded the molecule
        st.warning("Nothing to apply: draw the reactants first (the field is left as it was).")
        return
    S[f"{key}_drawn"] = str(value)
    st.rerun()
