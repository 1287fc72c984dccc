"""The chemist's molecule editor of the DRUG reply form (docs/annotating.md, "Drawing the reactants").

Ketcher (streamlit-ketcher: its build and the Indigo toolkit ship in the wheel and are served by the
app's own server, from a copy quicker to start: pxp.app.annotate.ketcher) is one editor per page,
made hidden, in the background, once a DRUG reply form is on screen, outside that form (a new form
keeps it); Draw (or DRAW_KEY) shows it over the whole window. Ketcher takes its molecules only when
it is made, so other reactants in the field make a new editor, again in the background (a new frame
takes 1–1.5 s on two cores); the same molecules, or a field RDKit cannot read yet, keep the one
there is. It never takes the focus, and so no key, from the page (hidden, it is also inert). Apply
puts Ketcher's SMILES into the reactant field, which checks it with RDKit like typed SMILES.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from pxp.app.a11y.page import script_frame
from pxp.app.annotate.ketcher import st_ketcher
from pxp.app.annotate.keys import S
from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.live.turns import LiveSession

#: opens the editor, also from inside the SMILES field (Alt chords reach Streamlit there)
DRAW_KEY = "Alt+M"
CLOSE_KEY = "Escape"
#: the page's one editor: its box's element key, and the prefix of its session-state keys
BOX = "annotate_editor"
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
#: Ketcher's own markup mended from outside (docs/accessibility.md, "Ketcher"): the element symbols of its atom
#: palette in their colour darkened to 4.5:1 (Cl's green is 1.9:1 on white), its copy menu's 9-pixel toggle
#: given a 24-pixel target (WCAG 2.2, 2.5.8)
KETCHER_CSS = repr("button[value] > span { color: color-mix(in srgb, currentColor 58%, black); } "
                   "button.expanded { min-width: 24px; min-height: 24px; }")
#: the editor never takes the focus from the page: Ketcher focuses its frame as it starts (a textarea
#: of its own, autofocused), and the page's keys (Ctrl+Enter, Alt+1, ...; Esc once it is shown) would
#: then go to the frame, hidden or not; so the frame's focus() acts only while it is shown and the
#: focus is already in it (the chemist clicked in Ketcher), from as soon as the frame has a document,
#: before Ketcher starts; hidden, its box is also inert. Shown, it is a dialog (docs/accessibility.md,
#: "Keyboard"): the rest of the page is inert, so Tab stays in the editor, the focus goes to its Close
#: button, Esc in Ketcher closes it too (unless a dialog of Ketcher's is open), and once it is hidden
#: again (Close or Apply) the focus is back in the reactant field. Ketcher's height follows the window:
#: the frame's own wrapper (same origin) is given what the window leaves below the frame's top, and
#: Reset/Apply move onto the free end of Ketcher's bottom toolbar. What Ketcher's own markup lacks is
#: mended from outside (KETCHER_CSS, and a name for its clipboard field and its copy menu's toggle).
#: Our own element key, no page text read or written.
FIT_JS = """<script>
(function () {
  const w = window.parent, d = w.document, box = '.st-key-""" + BOX + """';
  const hidden = (e) => { const b = e.closest(box); return !b || w.getComputedStyle(b).visibility === 'hidden'; };
  const guard = (f) => {
    let fw;
    try { fw = f.contentWindow; if (!fw || fw.__pxpGuard) return; fw.__pxpGuard = true; } catch (e) { return; }
    const focus = fw.HTMLElement.prototype.focus;
    fw.HTMLElement.prototype.focus = function (o) { if (!hidden(f) && d.activeElement === f) focus.call(this, o); };
    if (d.activeElement === f && fw.document.activeElement !== fw.document.body) {
      fw.document.activeElement.blur();  // focused before it could be guarded
    }
  };
  const closer = () => d.querySelector('.st-key-""" + BOX + """_close button');
  const mend = (f) => {  // Ketcher's markup, mended from outside (its frame is served by our server)
    const doc = f.contentDocument;
    if (!doc || !doc.head) return;
    if (!doc.getElementById('pxp-a11y')) {
      const s = doc.createElement('style');
      s.id = 'pxp-a11y';
      s.textContent = """ + KETCHER_CSS + """;
      doc.head.appendChild(s);
      doc.addEventListener('keydown', (e) => {
        if (e.key === 'Escape' && !doc.querySelector('[role="dialog"]') && closer()) closer().click();
      });
    }
    const clip = doc.querySelector('textarea.cliparea:not([aria-label])');
    if (clip) clip.setAttribute('aria-label', 'Ketcher clipboard');
    doc.querySelectorAll('button.expanded:not([aria-label])')
      .forEach((b) => b.setAttribute('aria-label', 'More copy formats'));
  };
  // shown, the editor is a dialog: the rest of the page inert, the focus on Close; hidden, the focus back in the field
  const modal = (b, shown) => {
    if (shown && !b.__pxpModal) {
      b.__pxpModal = true;
      for (let e = b; e.parentElement && e !== d.body; e = e.parentElement) {
        for (const s of e.parentElement.children) {
          if (s !== e && !s.inert && s.tagName !== 'SCRIPT') { s.inert = true; s.dataset.pxpInert = '1'; }
        }
      }
    }
    if (shown && !b.__pxpFocused && closer()) { b.__pxpFocused = true; closer().focus(); }
    if (!shown && b.__pxpModal) {
      b.__pxpModal = b.__pxpFocused = false;
      d.querySelectorAll('[data-pxp-inert]').forEach((s) => { s.inert = false; delete s.dataset.pxpInert; });
      const field = [...d.querySelectorAll('[class*="st-key-annotate_"][class*="_pred"] input')].pop();
      if (field) field.focus();
    }
  };
  const watched = new w.WeakSet();
  const guardAll = () => d.querySelectorAll(box).forEach((b) => {
    const h = w.getComputedStyle(b).visibility === 'hidden';
    if (b.inert !== h) b.inert = h;
    modal(b, !h);
    b.querySelectorAll('iframe').forEach((f) => {
      if (!watched.has(f)) { watched.add(f); f.addEventListener('load', () => guard(f)); }
      guard(f);
    });
  });
  const fit = () => {
    guardAll();
    d.querySelectorAll(box + ' iframe').forEach((f) => {
      mend(f);
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
  if (w.__pxpGuardKetcher) w.__pxpGuardKetcher.disconnect();
  w.__pxpFitKetcher = w.setInterval(fit, 250);
  w.__pxpGuardKetcher = new w.MutationObserver(guardAll);  // a new frame is guarded at once
  w.__pxpGuardKetcher.observe(d.body, {childList: true, subtree: true});
  w.addEventListener('resize', fit);
  fit();
})();
</script>"""


def take_drawn(key: str) -> None:
    """Put the molecule applied in the editor into the reactant field (state `{key}_pred`) of the
    reply form keyed `key`; called before the field is made, in the rerun after Apply."""
    drawn = S.pop(f"{BOX}_drawn", None)
    if drawn is not None and drawn[0] == key:
        S[f"{key}_pred"] = drawn[1]


def draw_button(key: str) -> None:
    """The Draw button under the reactant field of the reply form keyed `key`: it shows the editor
    (molecule_editor). Kept out of the Tab order (pxp.app.annotate.tab_order) so that Tab goes from
    the prediction to the explanation."""
    if st.button("Draw", key=f"{key}_draw", icon=":material/draw:", type="tertiary", shortcut=DRAW_KEY,
                 help="Draw the reactants in a molecule editor (Ketcher); Apply puts them in the field"):
        S[f"{BOX}_open"] = True


def _molecules(smiles: str) -> frozenset[str] | None:
    """The molecules of `smiles` by RDKit, or None while it cannot read them (half typed)."""
    try:
        return smiles_set(smiles)
    except InvalidSmiles:
        return None


def editor_box() -> DeltaGenerator:
    """The editor's box: made first in the conversation pane, so its place in the page, and the
    editor in it, stay the same from one reply form to the next (the editor is put in it by
    molecule_editor, after the form). Fixed over or off the window, it takes no room in the pane."""
    return st.container(key=BOX)


def molecule_editor(box: DeltaGenerator, s: LiveSession, key: str) -> None:
    """The page's editor in `box`, hidden or shown, for the reply form keyed `key`, pre-filled with
    its field's reactants, or the machine's when that is empty. Its only value is Ketcher's Apply: a
    value that is neither its pre-fill nor one already taken goes to the field and the editor is
    hidden (an empty canvas changes nothing)."""
    machine = s.last_from(Sender.MACHINE)
    prefill = str(S.get(f"{key}_pred") or "").strip() or (machine.prediction if machine else "")
    made_for = S.get(f"{BOX}_for")
    wanted = _molecules(prefill)
    if made_for is None or (wanted is not None and wanted != _molecules(made_for)):
        S[f"{BOX}_n"] = S.get(f"{BOX}_n", 0) + 1
        S[f"{BOX}_for"] = prefill
    prefill = S[f"{BOX}_for"]
    shown = bool(S.get(f"{BOX}_open"))
    with box:
        st.html((_SHOWN if shown else _HIDDEN).format(box=BOX))
        with st.container(horizontal=True, vertical_alignment="center"):
            st.caption("**Draw the reactants** (a molecule each), then **Apply**: they go to the field. "
                       "Close (Esc) leaves your answer as it was.")
            if shown:  # hidden, the editor has no key (Esc stays the page's)
                st.button("Close", key=f"{BOX}_close", icon=":material/close:", shortcut=CLOSE_KEY,
                          type="tertiary", on_click=S.__setitem__, args=(f"{BOX}_open", False))
        value = st_ketcher(prefill, height=EDITOR_HEIGHT, key=f"{BOX}_ketcher_{S[f'{BOX}_n']}")
        script_frame(FIT_JS)
        warn = st.empty()
    if value == prefill or value == S.get(f"{BOX}_taken"):
        return
    if not value.strip():  # Apply on an empty canvas
        if shown:
            warn.warning("Nothing to apply: draw the reactants first (the field is left as it was).")
        return
    S[f"{BOX}_taken"] = value
    S[f"{BOX}_drawn"] = (key, value)
    S[f"{BOX}_open"] = False
    st.rerun()
