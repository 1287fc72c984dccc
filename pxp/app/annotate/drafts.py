"""The reply form's draft: what the expert has typed or picked for message j (prediction,
explanation, the two answers, the chosen tag), stored as they go and restored after a reload or a
server restart; discarded when the message is sent (README "Annotate": nothing lost on reload).
"""

from __future__ import annotations

from typing import Any

from pxp.app import resources
from pxp.app.annotate.keys import S
from pxp.protocols.pxp.rules import Tag
from pxp.running.pxp.live import drafts
from pxp.running.pxp.live.turns import LiveSession

#: the form's fields kept in a draft (suffixes of the form's state keys)
FIELDS = ("pred", "expl", "match", "agree", "tag")


def _fields(key: str) -> dict[str, Any]:
    out = {f: S.get(f"{key}_{f}") for f in FIELDS}
    out["tag"] = out["tag"].value if isinstance(out["tag"], Tag) else None
    return out


def _put(key: str, f: str, v: Any) -> None:
    if f == "tag":
        v = Tag(v) if v in {t.value for t in Tag} else None
    elif f in ("match", "agree"):
        v = bool(v)
    else:
        v = str(v)
    S[f"{key}_{f}"] = v


def restore_draft(s: LiveSession, key: str) -> None:
    """Put the draft of this message back into the form before its widgets are made: this page's own
    copy (fields a run that failed before drawing the form, e.g. the database away, dropped), else
    once the stored draft (a fresh page: a reload, a new tab or a restarted server)."""
    me = S.get("annotate_me")
    if me is None:
        return
    if f"{key}_saved" not in S:
        S[f"{key}_saved"] = drafts.load_draft(resources.engine(), annotator_id=int(me), session_id=s.id, j=s.j)
    for f, v in (S[f"{key}_saved"] or {}).items():
        if f in FIELDS and v is not None and f"{key}_{f}" not in S:
            _put(key, f, v)


def save_draft(s: LiveSession, key: str) -> None:
    """Store the form's fields when they changed since the last store (or the restore)."""
    me = S.get("annotate_me")
    if me is None:
        return
    now = _fields(key)
    saved = S.get(f"{key}_saved")
    if saved is None and not any(now[f] for f in ("pred", "match", "agree", "tag")):
        saved = now  # untouched beyond the defaults: nothing to keep yet
    if now != saved:
        S[f"{key}_saved"] = now  # kept on the page first: a failing store below loses nothing
        drafts.save_draft(resources.engine(), annotator_id=int(me), session_id=s.id, j=s.j, content=now)
    S[f"{key}_saved"] = now


def discard_draft(s: LiveSession) -> None:
    """Forget the draft: its message has been sent."""
    me = S.get("annotate_me")
    if me is not None:
        drafts.discard_draft(resources.engine(), annotator_id=int(me), session_id=s.id)
