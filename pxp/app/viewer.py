"""The radiograph viewer: a custom component (st.components.v2) fed the image's bytes as its data
(docs/annotating.md "Pages"; docs/operations.md "Login and roles": case images only to those who may see them).

The PNG travels in the page's own session (the websocket of a logged-in user), never as a media URL
that a copied link could fetch without login. In the browser it is decoded into a canvas: the wheel
zooms about the cursor, a drag pans, a double-click fits. The canvas holds the pixels, so window/level
can be applied in the browser (getImageData) without a round trip. No text is rendered as HTML and
nothing is fetched from anywhere.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

_HTML = """<div class="pxp-viewer" data-pxp-viewer="1"><canvas></canvas></div>
<div class="pxp-hint">Wheel: zoom · drag: pan · double-click: fit</div>"""

_CSS = """.pxp-viewer { position: relative; overflow: hidden; width: 100%; height: 420px; background: #000;
  border-radius: 8px; cursor: grab; touch-action: none; }
.pxp-viewer canvas { position: absolute; left: 0; top: 0; transform-origin: 0 0; user-select: none; }
.pxp-hint { font: 12px sans-serif; color: #666; margin-top: 4px; }"""

_JS = """
// The radiograph viewer: the image arrives as this component's data (raw PNG bytes) and is drawn
// into a canvas; wheel zoom about the cursor, drag to pan, double-click to fit. State lives on the
// element, so a new image (e.g. another window/level) keeps the zoom when its size is unchanged.
function bytesOf(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}
export default function (component) {
  const { data, parentElement } = component;
  const v = parentElement.querySelector(".pxp-viewer"), c = v.querySelector("canvas");
  let st = v.pxp;
  if (!st) {
    st = v.pxp = { s: 1, x: 0, y: 0, fit: 1, drag: null, w: 0, h: 0 };
    const show = () => { c.style.transform = `translate(${st.x}px,${st.y}px) scale(${st.s})`; };
    st.show = show;
    st.reset = () => {
      if (!st.w) return;
      st.fit = Math.min(v.clientWidth / st.w, v.clientHeight / st.h);
      st.s = st.fit; st.x = (v.clientWidth - st.w * st.s) / 2; st.y = (v.clientHeight - st.h * st.s) / 2;
      show();
    };
    v.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = v.getBoundingClientRect(), px = e.clientX - r.left, py = e.clientY - r.top;
      const n = Math.min(Math.max(st.s * Math.exp(-e.deltaY * 0.0015), st.fit), st.fit * 8);
      st.x = px - (px - st.x) * n / st.s; st.y = py - (py - st.y) * n / st.s; st.s = n; show();
    }, { passive: false });
    v.addEventListener("pointerdown", (e) => { st.drag = [e.clientX - st.x, e.clientY - st.y];
      v.setPointerCapture(e.pointerId); v.style.cursor = "grabbing"; });
    v.addEventListener("pointermove", (e) => { if (st.drag) { st.x = e.clientX - st.drag[0];
      st.y = e.clientY - st.drag[1]; show(); } });
    v.addEventListener("pointerup", () => { st.drag = null; v.style.cursor = "grab"; });
    v.addEventListener("dblclick", () => st.reset());
    window.pxpViewer = () => ({ scale: st.s / st.fit, x: st.x, y: st.y, width: st.w, height: st.h });
  }
  const bytes = bytesOf(data);
  if (!bytes) return;
  createImageBitmap(new Blob([bytes], { type: "image/png" })).then((bitmap) => {
    const same = bitmap.width === st.w && bitmap.height === st.h;
    c.width = st.w = bitmap.width; c.height = st.h = bitmap.height;
    c.getContext("2d").drawImage(bitmap, 0, 0);
    bitmap.close();
    v.dataset.drawn = String(Number(v.dataset.drawn || 0) + 1);
    if (!same) st.reset(); else st.show();
  });
}
"""

_component: Any = None


def _viewer() -> Any:
    global _component
    if _component is None:
        _component = st.components.v2.component("pxp_xray_viewer", html=_HTML, css=_CSS, js=_JS)
    return _component


def image_viewer(png: bytes, *, key: str) -> None:
    """The radiograph (PNG bytes) in the browser-side viewer (420 px high), sent as the component's data."""
    _viewer()(data=png, key=key, height=444)


__all__ = ["image_viewer"]
