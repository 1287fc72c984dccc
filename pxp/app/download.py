"""Downloads through the page's own connection (docs/operations.md "Login and roles"): no research
file at a media URL.

`st.download_button` serves its file at a `/media/<hash>` URL that any client can fetch without
the session's login, and for minutes after logout. This button is a custom component
(st.components.v2) instead: the file's bytes travel as the component's data over the logged-in
session's websocket and are saved in the browser from a Blob, so a copied link holds nothing. A
file made by a function is made on the click (the component asks, the next run sends it, the
browser saves it once). The label is set as text, never as HTML.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import streamlit as st

S = st.session_state

_HTML = """<button type="button" class="pxp-dl" data-pxp-download="1"></button>"""

_CSS = """.pxp-dl { font: inherit; font-size: 14px; padding: 6px 12px; border-radius: 8px; cursor: pointer;
  border: 1px solid rgba(49, 51, 63, 0.2); background: #fff; color: rgb(49, 51, 63); }
.pxp-dl:hover { border-color: #2e7d32; color: #2e7d32; }
.pxp-dl:focus-visible { outline: 2px solid #2e7d32; }"""

_JS = """
// A download from the component's data: a JSON header line, then the file's bytes. The file is
// saved from a Blob (no URL on the server); a file asked for on a click is saved once, when its
// bytes arrive (the header's "nonce" is new).
function split(data) {
  const all = data instanceof ArrayBuffer ? new Uint8Array(data)
    : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
  if (!all) return null;
  const cut = all.indexOf(10);
  return { head: JSON.parse(new TextDecoder().decode(all.subarray(0, cut))), body: all.subarray(cut + 1) };
}
function save(head, body) {
  const url = URL.createObjectURL(new Blob([body], { type: head.mime }));
  const a = document.createElement("a");
  a.href = url; a.download = head.name; document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const b = parentElement.querySelector(".pxp-dl"), got = split(data);
  if (!got) return;
  const { head, body } = got;
  b.textContent = head.label;  // no icon: a glyph the app's fonts lack draws as an empty box
  b.title = head.name;
  b.onclick = () => { if (head.lazy) setTriggerValue("ask", Date.now()); else save(head, body); };
  if (head.nonce && b.dataset.saved !== String(head.nonce)) { b.dataset.saved = String(head.nonce); save(head, body); }
}
"""

_component: list[Any] = []


def _made() -> Any:
    if not _component:
        _component.append(st.components.v2.component("pxp_download", html=_HTML, css=_CSS, js=_JS))
    return _component[0]


def _asked(key: str) -> None:
    S[f"{key}__ask"] = True


def download(label: str, data: bytes | str | Callable[[], bytes | str], *, file_name: str, mime: str,
             key: str) -> None:
    """A download button whose file reaches only this session (see the module docstring). `data` may
    be a function: it is called on the click, not on every run."""
    head: dict[str, Any] = {"label": label, "name": file_name, "mime": mime}
    body = b""
    if callable(data):
        head["lazy"] = True
        if S.pop(f"{key}__ask", False):
            made = data()
            body = made.encode("utf-8") if isinstance(made, str) else made
            S[f"{key}__nonce"] = head["nonce"] = int(S.get(f"{key}__nonce", 0)) + 1
    else:
        body = data.encode("utf-8") if isinstance(data, str) else data
    payload = json.dumps(head).encode("utf-8") + b"\n" + body
    _made()(data=payload, key=key, on_ask_change=lambda: _asked(key), height=40)


__all__ = ["download"]
