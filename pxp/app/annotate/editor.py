"""The chemist's molecule editor in the DRUG reply form (docs/annotating.md, "Drawing the reactants").

Ketcher (streamlit-ketcher: its build and the Indigo toolkit ship in the wheel and are served by the
app's own server) is loaded in the background as soon as a DRUG reply form is on screen, hidden, and
Draw (or DRAW_KEY) shows that same editor over the whole window: the 12 MB bundle and Indigo are
loaded and started once per pre-fill, not at each opening (a new frame takes about 4 s on two cores).
Its pre-fill (the field's reactants, else the machine's) is given when it is made, so a new pre-fill
makes a new editor, again in the background. Apply puts Ketcher's SMILES into the reactant field,
which checks it with RDKit like typed SMILES.
"""

from __future__ import annotations

import streamlit as st

from pxp.app.annotate.keys import S
from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.live.turns import LiveSession

#: opens the editor, also from inside the SMILES field (Alt chords reach Streamlit there)
DRAW_KEY = "Alt+M"
CLOSE_KEY = "Escape"
#: Ketcher's own height (its toolbars and canvas) at a 1280×720 window; the fitting script
#: (FIT_JS) gives it the height the window has, in any window
EDITOR_HEIGHT = 590
#: the editor, hidden (but laid out, so Ketcher starts as it would on screen) or over the whole
#: window; our own constant CSS on our own element key, no user text
_HIDDEN = """<style>.st-key-{box} {{ position: fixed; left: -300vw; top: 0; width: 100vw;
  visibility: hidden; pointer-events: none; }}</style>"""
_SHOWN = """<style>.st-key-{box} {{ position: fixed; inset: 0; z-index: 1000100;
  background-color: white; padding: 0.15rem 1rem 0 1rem; gap: 0; overflow: hidden; }}
.st-key-{box} [data-testid="stCaptionContainer"] p {{ margin: 0; }}</style>"""
#: Ketcher's height follows the window: the frame's own wrapper (same origin) is given what the
#: window leaves below the frame's top, and Reset/Apply move onto the free end of Ketcher's bottom
#: toolbar; our own element key, no page text read or written
FIT_JS = """<script>
(function () {
  const w = window.parent, d = w.document;
  const fit = () => {
    d.querySelectorAll('[class*="st-key-annotate_"][class*="_editor"] iframe').forEach((f) => {
      const doc = f.contentDocument, root = doc && doc.querySelector('.Ketcher-root');
      const wrap = root && root.parentElement, row = wrap && wrap.nextElementSibling;
      if (!row) return;
      if (row.style.position !== 'absolute') {  // Reset and Apply over the bottom toolbar's free right end
        wrap.parentElement.style.position = 'relative';
        Object.assign(row.style, {position: 'absolute', right: '0.5rem', bottom: '2px', padding: '0',
                                  gap: '0.5rem', zIndex: '2'});
        row.querySelectorAll('button').forEach((b) => { b.style.padding = '0 0.75rem'; });
      }
      const h = Math.max(320, Math.floor(w.innerHeight - Math.max(0, f.getBoundingClientRect().top) - 4));
      if (wrap.style.height !== h + 'px') wrap.style.height = h + 'px';
    });
  };
  if (w.__pxpFitKetcher) w.clearInterval(w.__pxpFitKetcher);
  w.__pxpFitKetcher = w.setInterval(fit, 250);
  w.addEventListener('resize', fit);
})();
</script>"""


def take_drawn(key: str) -> None:
    """Put the molecule applied in the editor into the reactant field (state `{key}_pred`); called
    before the field is made, in the rerun after Apply."""
    drawn = S.pop(f"{key}_drawn", None)
    if drawn is not None:
        S[f"{key}_pred"] = drawn


def draw_button(s: LiveSession, key: str, smiles: str) -> None:
    """The Draw button under the reactant field, and the editor (hidden until Draw or DRAW_KEY),
    pre-filled with `smiles`, or the machine's when that is empty. Draw is kept out of the Tab order
    (pxp.app.annotate.tab_order) so that Tab goes from the prediction to the explanation."""
    if st.button("Draw", key=f"{key}_draw", icon=":material/draw:", type="tertiary", shortcut=DRAW_KEY,
                 help="Draw the reactants in a molecule editor (Ketcher); Apply puts them in the field"):
        S[f"{key}_draw_open"] = True
    machine = s.last_from(Sender.MACHINE)
    _editor(key, smiles.strip() or (machine.prediction if machine else ""))


def _same(a: str, b: str) -> bool:
    try:
        return smiles_set(a) == smiles_set(b)
    except InvalidSmiles:
        return a.strip() == b.strip()


def _editor(key: str, prefill: str) -> None:
    """The editor, hidden or shown. Its only value is Ketcher's Apply: a value that is neither its
    pre-fill nor one already taken goes to the field and the editor is hidden (an empty canvas
    changes nothing). A pre-fill with other molecules than the editor holds makes a new editor."""
    from streamlit_ketcher import st_ketcher

    made_for = S.get(f"{key}_ed_for")
    if made_for is None or not _same(prefill, made_for):
        S[f"{key}_ed_n"] = S.get(f"{key}_ed_n", 0) + 1
        S[f"{key}_ed_for"] = prefill
    prefill = S[f"{key}_ed_for"]
    shown = bool(S.get(f"{key}_draw_open"))
    box = f"{key}_editor"
    with st.container(key=box):
        st.html((_SHOWN if shown else _HIDDEN).format(box=box))
        with st.container(horizontal=True, vertical_alignment="center"):
            st.caption("**Draw the reactants** (a molecule each), then **Apply**: they go to the field. "
                       "Close (Esc) leaves your answer as it was.")
            st.button("Close", key=f"{key}_ed_close", icon=":material/close:", shortcut=CLOSE_KEY,
                      type="tertiary", on_click=S.__setitem__, args=(f"{key}_draw_open", False))
        value = str(st_ketcher(prefill, molecule_format="SMILES", height=EDITOR_HEIGHT,
                               key=f"{key}_ketcher_{S[f'{key}_ed_n']}") or "")
        st.iframe(FIT_JS, height=1)
    if value == prefill or value == S.get(f"{key}_ed_taken"):
        return
    if not value.strip():  # Apply on an empty canvas
        if shown:
            st.warning("Nothing to apply: draw the reactants first (the field is left as it was).")
        return
    S[f"{key}_ed_taken"] = value
    S[f"{key}_drawn"] = value
    S[f"{key}_draw_open"] = False
    st.rerun()
