"""The Annotate case pane: the case on the left (X-ray with window/level, target molecule or
text), as the human agent sees it (DESIGN §1).
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pxp.app import resources, ui
from pxp.running.pxp.live.turns import LiveSession


def split(s: LiveSession) -> list[float]:
    """Column widths: the case on the left, the conversation and reply (wide enough for the
    tag row on one line) on the right; a film takes nearly half (docs/annotating.md, Pages)."""
    return [0.95, 1.05] if s.asset_sha256 else [5.0, 7.0]


#: the case column stays in view while the conversation scrolls (our own constant CSS, no user text)
_STICKY = """<style>
div[data-testid="stColumn"]:has(.st-key-annotate_case_pane) { position: sticky; top: 3.75rem; align-self: flex-start;
  z-index: 2; }
</style>"""


def instance_panel(s: LiveSession) -> None:
    """The case: its number, key and image, molecule or text; it stays in view (sticky) while the
    conversation beside it scrolls."""
    st.html(_STICKY)
    with st.container(key="annotate_case_pane"):
        _case(s)


def _viewer_key(s: LiveSession) -> str:
    return f"annotate_img_{s.instance_id}"


def settled_window(s: LiveSession) -> dict[str, Any] | None:
    """The window the radiologist settled on in the case's viewer (its state as the browser last sent
    it; None: the image's default), read from the session, so the reply form need not follow the viewer."""
    state = st.session_state.get(ui.viewer_key(_viewer_key(s)))
    wl = state.get("wl") if isinstance(state, dict) else None
    return dict(wl) if isinstance(wl, dict) else None


def warm_case(engine: Engine, s: LiveSession) -> None:
    """Make the case's drawing ahead (the X-ray's viewer payload or the molecule's SVG) into the server's
    caches, so the case opens without decoding or drawing; errors are left for the page to show."""
    if s.match_kind == "smiles":
        ui.molecule_svg(s.payload)
    elif s.asset_sha256:
        ui.xray_payload(engine, s.instance_id)


def _case(s: LiveSession) -> None:
    eng = resources.engine()
    head = st.container(horizontal=True, vertical_alignment="center", key=f"annotate_case_{s.id}")
    with head:
        st.markdown(f"**Case {s.ordinal} of {s.instances}** · {ui.escape_md(s.instance_key)}")
        if s.synthetic:
            ui.synthetic_badge()
    if s.match_kind == "smiles":
        name = s.meta.get("name")
        st.markdown("**Target molecule**" + (f": {ui.escape_md(str(name))}" if name else ""))
        ui.molecule(s.payload, name=str(name) if name else None)
    elif s.asset_sha256:
        ui.xray(eng, s.instance_id, s.meta, key=_viewer_key(s))
    else:
        ui.show_text(s.payload, empty="(this case has no image)")
