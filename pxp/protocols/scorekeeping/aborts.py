"""Why an aborted episode ended, in words for the person who played it (the game master's rules,
pxp.protocols.scorekeeping.rules: an answer starts with ANSWER: on one line; a private reply starts
with ASIDE: then yes or no)."""

from __future__ import annotations

from pxp.protocols.scorekeeping import rules
from pxp.protocols.scorekeeping.episode import EpisodeRecord


def abort_reason(record: EpisodeRecord) -> str | None:
    """Why an aborted episode ended: which rule the answerer's reply broke, and which reply it was
    (numbered from 1 over the answerer's replies); None for an episode played to its end."""
    if not record.aborted:
        return None
    replies = [e for turn in record.turns for e in turn if e.get("from") == "Player 1"]
    if not replies:
        return "the episode was aborted before any reply"
    last = replies[-1]
    text = str(last["action"]["content"])
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 80 else shown[:80] + "…"
    if last["action"]["type"] == "probe answer":
        problem = rules.probe_problem(text) or "it was not a valid reply"
        return (f"reply {len(replies)} ({shown!r}) was the {rules.MAX_PROBE_ATTEMPTS}th invalid reply to a private "
                f"question ({problem}): a private reply starts with {rules.ASIDE_TAG} then {rules.YES} or {rules.NO}, "
                "on one line")
    problem = rules.answer_problem(text) or "it was not a valid answer"
    return (f"reply {len(replies)} ({shown!r}) broke the answer rule ({problem}): an answer starts with "
            f"{rules.ANSWER_TAG} and stays on one line")
