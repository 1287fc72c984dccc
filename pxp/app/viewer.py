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

_HTML = """<div class="pxp-viewer" data-pxp-viewer="1" role="img" aria-label="Radiograph of the case">
<canvas></canvas></div>
<div class="pxp-hint">Wheel: zoom · drag: pan · double-click: fit</div>"""

_CSS = """.pxp-viewer { position: relative; overflow: hidden; width: 100%; height: 400px; background: #000;
  border-radius: 8px; cursor: grab; touch-action: none; }
.pxp-viewer canvas { position: absolute; left: 0; top: 0; transform-origin: 0 0; user-select: none; }
.pxp-hint { font: 12px/16px sans-serif; color: #595959; margin-top: 4px; }"""

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


# --- the radiograph viewer with window/level in the browser ---------------------------------------

_WL_HTML = """<div class="pxp-wl" tabindex="0" role="application" aria-roledescription="radiograph viewer"
 aria-label="Radiograph of the case" aria-describedby="pxp-wl-hint">
<div class="pxp-bar" role="toolbar" aria-label="Window presets"></div>
<div class="pxp-viewer" data-pxp-viewer="wl"><canvas aria-hidden="true"></canvas>
<div class="pxp-read" aria-hidden="true"></div></div>
<div class="pxp-said" role="status" aria-live="polite"></div>
<div class="pxp-hint" id="pxp-wl-hint">Right-drag (or Shift+drag): window/level · wheel: zoom · drag: pan ·
double-click: fit · R: reset · I: invert · F or Alt+V: full screen (Esc: back)</div></div>"""

_WL_CSS = """.pxp-wl { outline: none; }
.pxp-wl:focus-visible .pxp-viewer { box-shadow: 0 0 0 2px #4a90d9; }
.pxp-viewer { position: relative; overflow: hidden; width: 100%; height: var(--pxp-film-h, max(420px, 62vh));
  background: #000;
  border-radius: 8px; cursor: grab; touch-action: none; }
.pxp-viewer canvas { position: absolute; left: 0; top: 0; transform-origin: 0 0; user-select: none;
  image-rendering: auto; }
.pxp-viewer:not([data-drawn]):not([data-pxp-preview])::before { content: "Loading the film…"; position: absolute;
  inset: 0; display: flex;
  align-items: center; justify-content: center; font: 14px sans-serif; color: #ddd; }
.pxp-read { position: absolute; right: 8px; bottom: 6px; font: 13px sans-serif; color: #ffd54f;
  background: rgba(0,0,0,.55); padding: 1px 6px; border-radius: 4px; pointer-events: none; }
.pxp-bar { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 4px; }
.pxp-bar button { font: 13px sans-serif; padding: 2px 8px; border-radius: 6px; border: 1px solid #bbb;
  background: #f6f6f6; color: #222; cursor: pointer; }
.pxp-bar button[aria-pressed="true"] { background: #dbe9fb; border-color: #4a90d9; }
.pxp-hint { font: 12px sans-serif; color: #666; margin-top: 4px; }
.pxp-said { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
.pxp-wl.pxp-full { position: fixed; inset: 0; z-index: 1000000; background: #111; padding: 8px; }
.pxp-wl.pxp-full .pxp-hint { color: #bbb; }"""

_WL_JS = """
// Window/level in the browser: the data is `PXPW`, a uint32 header length, a JSON header and one
// uint16 per pixel, or one byte for an 8-bit image (`bits`, pxp/data/pixels.py). A lookup table (one
// entry per stored value) maps the values through the window to grey levels on a canvas, so a drag
// never asks the server; the settled {center,
// width, invert} goes back as the component's state on pointer-up only. Zoom and pan live in a page
// map keyed by the image, so they survive a rerun (a Send) of the same case. Text is set with
// textContent only; nothing is fetched.
function bytesOf(d) {
  if (d instanceof ArrayBuffer) return new Uint8Array(d);
  if (ArrayBuffer.isView(d)) return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  return null;
}
function parse(bytes) {
  if (bytes.length < 8 || String.fromCharCode(...bytes.subarray(0, 4)) !== "PXPW") return null;
  const n = new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, true);
  const head = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const px = head.bits === 8 ? bytes.subarray(8 + n) : new Uint16Array(bytes.slice(8 + n).buffer);
  return { head, px };
}
function sig(bytes) {
  let h = bytes.length;
  for (let i = 0; i < bytes.length; i += Math.max(1, bytes.length >> 12)) h = (h * 31 + bytes[i]) | 0;
  return String(h);
}
const fmt = (x) => Math.abs(x) >= 100 ? x.toFixed(0) : x.toPrecision(3);
export default function (component) {
  const { data, parentElement, setStateValue } = component;
  const root = parentElement.querySelector(".pxp-wl"), v = root.querySelector(".pxp-viewer");
  const c = v.querySelector("canvas"), read = v.querySelector(".pxp-read"), bar = root.querySelector(".pxp-bar");
  const bytes = bytesOf(data);
  if (!bytes) return;
  const id = sig(bytes);
  let st = root.pxp;
  if (st && st.id === id) return;  // the same image: nothing to redraw, the view is as the user left it
  const img = parse(bytes);
  if (!img) return;
  const H = img.head, saved = (window.__pxpViews = window.__pxpViews || {})[id];
  // a preview (a low-resolution copy drawn while the film arrives; pxp.app.ui.xray) is not the page's film: no
  // viewer mark, no keys, no state sent; its element is marked once drawn, the film's once the film is drawn
  const host = root.getRootNode().host;
  if (H.preview) { v.removeAttribute("data-pxp-viewer"); v.dataset.pxpPreview = "1"; }
  st = root.pxp = { id, s: 1, x: 0, y: 0, fit: 1, drag: null, mode: null, w: H.w, h: H.h,
    center: H.center, width: H.width, invert: H.invert, lut: new Uint8ClampedArray(H.bits === 8 ? 256 : 65536),
    rgba: new Uint32Array(H.bits === 8 ? 256 : 65536), queued: false };
  c.width = H.w; c.height = H.h;
  const ctx = c.getContext("2d"), out = ctx.createImageData(H.w, H.h), o32 = new Uint32Array(out.data.buffer);
  const span = H.hi > H.lo ? H.hi - H.lo : 1, quantum = H.bits === 8 ? 1 : span / 65535;
  const keep = () => { window.__pxpViews[id] = { s: st.s / st.fit, x: st.x, y: st.y, center: st.center,
    width: st.width, invert: st.invert }; };
  const show = () => { c.style.transform = `translate(${st.x}px,${st.y}px) scale(${st.s})`; keep(); };
  const draw = () => {
    st.queued = false;
    const lo = st.center - st.width / 2, lut = st.lut;
    for (let q = 0; q < lut.length; q++) {
      let t = (H.lo + q * quantum - lo) / st.width;
      t = t < 0 ? 0 : t > 1 ? 1 : t;
      lut[q] = st.invert ? 255 - t * 255 : t * 255;
    }
    const px = img.px, rgba = st.rgba;  // one opaque grey RGBA word per value (little-endian: 0xAABBGGRR)
    for (let q = 0; q < lut.length; q++) rgba[q] = 0xff000000 | (lut[q] * 0x010101);
    for (let i = 0; i < px.length; i++) o32[i] = rgba[px[i]];
    ctx.putImageData(out, 0, 0);
    const unit = H.units ? " " + H.units : "", flip = st.invert ? " · inverted" : "";
    read.textContent = `W ${fmt(st.width)} · L ${fmt(st.center)}${unit}${flip}`;
    v.dataset.wl = `${st.center}|${st.width}|${st.invert ? 1 : 0}`;
    v.dataset.drawn = String(Number(v.dataset.drawn || 0) + 1);
    v.dataset.image = id;  // which image is on the canvas (tests and bench/bench_browser.py wait for it)
    if (host) host.setAttribute(H.preview ? "data-pxp-preview" : "data-pxp-drawn", "1");
    keep();
  };
  const redraw = () => { if (!st.queued) { st.queued = true; requestAnimationFrame(draw); } };
  // the window/level in words, said by a screen reader (the live region) once settled, not while dragging
  const said = root.querySelector(".pxp-said");
  const say = (extra = "") => { const unit = H.units ? " " + H.units : "";
    const flip = st.invert ? ", inverted" : "";
    said.textContent = `Window ${fmt(st.width)}, level ${fmt(st.center)}${unit}${flip}${extra}`; };
  const report = () => { say(); if (!H.preview) setStateValue("wl", { center: st.center, width: st.width,
                                                                     invert: st.invert }); };
  const fitView = () => {
    st.fit = Math.min(v.clientWidth / st.w, v.clientHeight / st.h) || 1; st.vw = v.clientWidth; st.vh = v.clientHeight;
    st.s = st.fit; st.x = (v.clientWidth - st.w * st.s) / 2; st.y = (v.clientHeight - st.h * st.s) / 2; show();
  };
  // the box as tall as the film needs, at most the height the page gives it (--pxp-film-h); in full screen
  // (F) the whole viewport
  const size = () => {
    if (root.classList.contains("pxp-full")) {
      const hint = root.querySelector(".pxp-hint"), top = v.getBoundingClientRect().top;
      v.style.height = Math.max(200, window.innerHeight - top - hint.offsetHeight - 14) + "px";
      return;
    }
    v.style.height = "";
    const most = v.clientHeight, want = Math.round(v.clientWidth * st.h / st.w);
    if (want > 0 && want < most) v.style.height = want + "px";
  };
  // a new box (a window resize, the sidebar folded, full screen): fit again, keeping the window/level and the
  // zoom (relative to the fit) about the image point at the box's centre
  const refit = () => {
    const W = v.clientWidth, Hb = v.clientHeight;
    if (!W || !Hb || (st.vw === W && st.vh === Hb)) return;
    if (!st.vw) { fitView(); return; }
    const z = st.s / st.fit, cx = (st.vw / 2 - st.x) / st.s, cy = (st.vh / 2 - st.y) / st.s;
    st.fit = Math.min(W / st.w, Hb / st.h) || 1; st.s = z * st.fit;
    st.x = W / 2 - cx * st.s; st.y = Hb / 2 - cy * st.s; st.vw = W; st.vh = Hb; show();
  };
  root.pxpFull = (on, focus = true, from = null) => {  // focus: the film takes it (its R and I keys), else it stays
    if (on) root.pxpFrom = from;  // where the keyboard was: it goes back there when the full view ends
    root.classList.toggle("pxp-full", on);
    // the page's sticky case column is a stacking context under Streamlit's sidebar and header: lifted while full
    for (let e = root.getRootNode().host; e && e !== document.body; e = e.parentElement || e.getRootNode().host) {
      if (getComputedStyle(e).position === "sticky" || e.dataset.pxpLifted) {
        e.dataset.pxpLifted = "1"; e.style.zIndex = on ? "1000002" : "";
      }
    }
    size(); refit();
    say(on ? ", full screen (Esc: back)" : "");
    const back = on ? null : root.pxpFrom;
    if (!on) root.pxpFrom = null;
    if (back && back.isConnected && back !== root && !root.contains(back) && back !== document.body) back.focus();
    else if (focus) root.focus();
  };
  if (!H.preview) window.__pxpFilm = root;  // the film F and Esc act on: the newest drawn
  const setWL = (center, width, invert) => { st.center = center; st.width = Math.max(width, span / 65535);
    if (invert !== undefined) st.invert = invert; redraw(); };
  bar.replaceChildren();
  for (const p of H.presets) {
    const b = document.createElement("button");
    b.type = "button"; b.textContent = p.name;
    b.addEventListener("click", () => { setWL(p.center, p.width, H.invert); report(); root.focus(); });
    bar.appendChild(b);
  }
  const inv = document.createElement("button");
  inv.type = "button"; inv.textContent = "Invert";
  inv.addEventListener("click", () => { setWL(st.center, st.width, !st.invert); report(); root.focus(); });
  bar.appendChild(inv);
  if (!root.dataset.bound) {
    root.dataset.bound = "1";
    const S = () => root.pxp;
    v.addEventListener("contextmenu", (e) => e.preventDefault());
    v.addEventListener("wheel", (e) => {
      e.preventDefault(); const s = S();
      const r = v.getBoundingClientRect(), px = e.clientX - r.left, py = e.clientY - r.top;
      const n = Math.min(Math.max(s.s * Math.exp(-e.deltaY * 0.0015), s.fit), s.fit * 8);
      s.x = px - (px - s.x) * n / s.s; s.y = py - (py - s.y) * n / s.s; s.s = n;
      c.style.transform = `translate(${s.x}px,${s.y}px) scale(${s.s})`; s.keep();
    }, { passive: false });
    v.addEventListener("pointerdown", (e) => {
      const s = S(); s.mode = (e.button === 2 || e.shiftKey) ? "wl" : "pan";
      s.drag = [e.clientX, e.clientY, s.x, s.y, s.center, s.width];
      v.setPointerCapture(e.pointerId); v.style.cursor = s.mode === "wl" ? "crosshair" : "grabbing";
    });
    v.addEventListener("pointermove", (e) => {
      const s = S(); if (!s.drag) return;
      const [x0, y0, px, py, c0, w0] = s.drag, dx = e.clientX - x0, dy = e.clientY - y0;
      if (s.mode === "wl") { s.setWL(c0 - dy * s.step, w0 + dx * s.step); }
      else { s.x = px + dx; s.y = py + dy; c.style.transform = `translate(${s.x}px,${s.y}px) scale(${s.s})`; s.keep(); }
    });
    const up = () => { const s = S(); if (!s.drag) return; const was = s.mode; s.drag = null; s.mode = null;
      v.style.cursor = "grab"; if (was === "wl") s.report(); };
    v.addEventListener("pointerup", up);
    v.addEventListener("pointercancel", up);
    v.addEventListener("dblclick", () => S().fitView());
    new ResizeObserver(() => { const s = S(); if (!s) return;
      if (v.clientWidth !== s.boxW) { s.boxW = v.clientWidth; s.size(); }
      s.refit(); }).observe(v);
    window.addEventListener("resize", () => { const s = S(); if (s) { s.size(); s.refit(); } });
    root.addEventListener("keydown", (e) => {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      const s = S();
      if (e.key === "r" || e.key === "R") { s.setWL(s.H.center, s.H.width, s.H.invert); s.fitView(); s.report(); }
      else if (e.key === "i" || e.key === "I") { s.setWL(s.center, s.width, !s.invert); s.report(); }
      else return;
      e.preventDefault();
    });
  }
  Object.assign(st, { H, keep, setWL, report, fitView, size, refit, step: span / 500 });
  if (!said.textContent) say();
  if (!window.__pxpFilmKeys) {  // F (not while typing in a field) or Alt+V (anywhere; the browser keeps Alt+F):
    window.__pxpFilmKeys = true;  // the film over the whole viewport, and back; Esc: back. On the window, so
    // before the page's own key handling (pxp.app.annotate.tab_order holds Alt chords while the page updates)
    window.addEventListener("keydown", (e) => {
      const r = window.__pxpFilm;
      if (!r || !r.isConnected || e.ctrlKey || e.metaKey) return;
      const t = e.composedPath()[0], full = r.classList.contains("pxp-full");
      const typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.isContentEditable);
      if (e.altKey ? e.code === "KeyV" : (e.key === "f" || e.key === "F") && !typing) r.pxpFull(!full, !e.altKey, t);
      else if (e.key === "Escape" && full && !e.altKey) r.pxpFull(false);
      else return;
      e.preventDefault(); e.stopPropagation();
    }, true);
  }
  if (!H.preview) window.pxpViewer = () => { const s = root.pxp; return { scale: s.s / s.fit, x: s.x, y: s.y,
    width: s.w, height: s.h, center: s.center, window: s.width, invert: s.invert }; };
  requestAnimationFrame(() => {
    size(); st.boxW = v.clientWidth;
    if (saved) { st.fit = Math.min(v.clientWidth / st.w, v.clientHeight / st.h) || 1; st.s = saved.s * st.fit;
      st.x = saved.x; st.y = saved.y; st.center = saved.center; st.width = saved.width; st.invert = saved.invert;
      st.vw = v.clientWidth; st.vh = v.clientHeight; show(); }
    else fitView();
    draw();
  });
}
"""

_components: dict[str, Any] = {}


def _made(name: str, html: str, css: str, js: str) -> Any:
    """The component `name`, declared once per process."""
    if name not in _components:
        _components[name] = st.components.v2.component(name, html=html, css=css, js=js)
    return _components[name]


def radiograph_viewer(payload: bytes, *, key: str) -> dict[str, Any] | None:
    """The radiograph (a pxp/data/pixels.py payload) with window/level in the browser; returns the
    {center, width, invert} the user settled on (None until they change it)."""
    viewer = _made("pxp_radiograph_viewer", _WL_HTML, _WL_CSS, _WL_JS)
    result = viewer(data=payload, key=key, default={"wl": None}, on_wl_change=lambda: None)
    wl = getattr(result, "wl", None)
    return dict(wl) if isinstance(wl, dict) else None


def image_viewer(png: bytes, *, key: str) -> None:
    """The radiograph (PNG bytes) in the browser-side viewer (400 px high, its hint below: the component's 444 px
    hold them with no scroll bar), sent as the component's data."""
    _made("pxp_xray_viewer", _HTML, _CSS, _JS)(data=png, key=key, height=444)


__all__ = ["image_viewer", "radiograph_viewer"]
