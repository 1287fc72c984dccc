"""The human agent in the browser (DESIGN §1, "The human in the browser").

The expert gives their own (possibly revised) answer and judges whether the machine's
explanation agrees with theirs. The facts the content decides are computed, never asked
(pxp.protocols.pxp.facts): `match` is the task's MATCH over their prediction and the
machine's whenever both parse and MATCH is exact (RAD labels, DRUG SMILES sets), and
`changed` is whether their answer differs from their own previous one. The tag follows
from the AGENT rule, or the expert picks it directly (as the chemists of the DRUG study
did); then the facts the tag implies are recorded for what is left to judgment, and a tag
the rule forbids or the content contradicts is refused with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pxp.agents.base import AgentBase, Answer, Facts, Query
from pxp.data.chem import InvalidSmiles
from pxp.data.importers.limits import MAX_TEXT_CHARS
from pxp.protocols.pxp.facts import ContentFacts, content_facts, content_refusal, same_answer
from pxp.protocols.pxp.rules import Msg, ProtocolError, Sender, Tag, agent_tag, check_tag, implied_facts, tag_reason
from pxp.protocols.text import TextRefused, clean_name, clean_text
from pxp.tasks.base import (
    DEFAULT_AGREE_THRESHOLD,
    content_match,
    lexical_agree,
    match_for,
    normalise_label,
)

BROWSER_LABEL = "browser"


class BrowserHuman(AgentBase):
    """One turn of the human in the browser: the submitted answer and facts, and the window
    ({center, width, invert}) the radiologist viewed the image at, stored in C_j as "view".

    A new object is made for each submission; the engine's decide() checks a directly
    chosen tag against the facts and raises TagRefused for a forbidden one.
    """

    label = BROWSER_LABEL

    def __init__(
        self, answer: Answer, facts: Facts, *, match_kind: str = "label",
        agree_threshold: float = DEFAULT_AGREE_THRESHOLD, view: dict[str, Any] | None = None,
    ) -> None:
        self.answer = answer
        self.view = view
        self._facts = facts
        self.match_kind = match_kind
        self.agree_threshold = agree_threshold

    def ask(self, q: Query) -> Answer:
        return self.answer

    def facts(self, q: Query, answer: Answer) -> Facts | None:
        """The facts as stored: match and changed from the content (whatever the form sent),
        agree and a chosen tag from the expert; ProtocolError (one line) for a refused tag."""
        if (why := too_long(answer)) is not None:
            raise ProtocolError(why)
        content = human_content(q.history, answer, match_kind=self.match_kind)
        turn = human_turn(q.j, q.k, match=self._facts.match, agree=self._facts.agree,
                          changed=content.changed, chosen=self._facts.tag, content=content,
                          noun=prediction_noun(self.match_kind))
        if turn.facts is None:
            raise ProtocolError(turn.refused or "the tag is not allowed here")
        return turn.facts

    def match(self, y1: str, y2: str, q: Query) -> bool:
        try:
            return match_for(self.match_kind)(y1, y2)
        except InvalidSmiles:
            return False

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        return lexical_agree(e1, e2, self.agree_threshold)

    def context(self, q: Query, answer: Answer, tag: Tag) -> dict[str, Any]:
        return {
            "agent": self.label,
            "j": q.j,
            "tag_chosen": self._facts.tag.value if self._facts.tag is not None else None,
            **({"view": self.view} if self.view is not None else {}),
        }


def clean_answer(prediction: str, explanation: str) -> tuple[Answer, str | None]:
    """The expert's typed answer under the text rule (docs/development.md "The text rule"): the
    prediction a short value, the explanation free text; with the one line why it cannot be sent."""
    try:
        return Answer(clean_name(prediction, "your prediction"), clean_text(explanation, "your explanation")), None
    except TextRefused as err:
        return Answer(prediction, explanation), str(err)


def answer_changed(
    new: Answer, previous: Answer | None, *, match_kind: str = "label"
) -> bool:
    """Whether the expert edited their answer since their own previous message.

    Predictions are compared with the task's MATCH (so re-typing a SMILES in another
    order is no change); explanations by their text with spacing folded.
    """
    if previous is None:
        return False
    return not same_answer(new.prediction, new.explanation, previous.prediction, previous.explanation,
                           content_match(match_kind))


def too_long(answer: Answer) -> str | None:
    """Why the answer cannot be sent for its length (the one text limit, named), or None."""
    for what, text in (("prediction", answer.prediction), ("explanation", answer.explanation)):
        if len(text) > MAX_TEXT_CHARS:
            return (f"your {what} is {len(text):,} characters, over the {MAX_TEXT_CHARS:,}-character limit "
                    "for a text field; shorten it")
    return None


def human_content(history: Sequence[Msg], answer: Answer, *, match_kind: str = "label") -> ContentFacts:
    """The facts the content decides for the human's message after `history` (DESIGN §1)."""
    return content_facts(history, Sender.HUMAN, answer.prediction, answer.explanation,
                         content_match(match_kind))


def prediction_noun(match_kind: str) -> str:
    """What a prediction is called in a one-line refusal: reactants (DRUG), label, prediction."""
    return {"smiles": "reactants", "label": "label"}.get(match_kind, "prediction")


def predictions_match(y1: str, y2: str, *, match_kind: str = "label") -> bool | None:
    """MATCH of two predictions for the form's hint; None when one does not parse."""
    if not y1.strip() or not y2.strip():
        return None
    try:
        return match_for(match_kind)(y1, y2)
    except InvalidSmiles:
        return None


@dataclass(frozen=True)
class HumanTurn:
    """The live preview of the expert's message: its tag and why, or why it is refused."""

    tag: Tag | None
    reason: str
    facts: Facts | None
    refused: str | None = None
    chosen: bool = False

    @property
    def ok(self) -> bool:
        return self.refused is None and self.facts is not None


def _changed_reason(chosen: Tag, changed: bool) -> str:
    """Why a tag is refused when it disagrees with whether the expert edited their answer."""
    if changed:
        return (f"{chosen.value} means you kept your answer, but you edited it since your last "
                "message: pick REVISE, or undo the edit")
    return (f"{chosen.value} means you changed your answer: edit your prediction or "
            "explanation first")


def human_turn(
    j: int, k: int, *, match: bool | None, agree: bool | None, changed: bool,
    chosen: Tag | None = None, new_prediction_matches: bool | None = None,
    content: ContentFacts | None = None, noun: str = "prediction",
) -> HumanTurn:
    """AGENT(h, j) for the browser: the tag from the expert's facts, or their chosen tag.

    `content` holds the facts the content decides (human_content): its match replaces the
    expert's answer to the prediction question (which only fills in the prediction), its
    changed replaces `changed`, and a chosen tag it contradicts is refused naming the two
    predictions (content_refusal).

    A chosen tag is accepted when the stated facts give it, or, for questions left
    unanswered, when some facts (implied_facts) give it with the same `changed`;
    otherwise it is refused with the rule's one-line reason. A tag that contradicts an
    answer the expert gave is refused, so the record matches the screen (docs/annotating.md, Keys).
    RATIFY with an edited prediction that no longer matches the machine's is refused
    too (`new_prediction_matches` is False).
    """
    if content is not None:
        changed = content.changed
        if content.match is not None:
            match = content.match
            if chosen is None and agree is None:
                return HumanTurn(None, "", None,
                                 refused="say whether its explanation agrees with yours, or pick a tag yourself")
        if chosen is not None and (why := content_refusal(chosen, j, k, content, agree=agree, noun=noun)):
            return HumanTurn(chosen, "", None, chosen=True, refused=why)
    changed = changed and j > 2
    turn = _human_turn(j, k, match=match, agree=agree, changed=changed, chosen=chosen,
                       new_prediction_matches=new_prediction_matches)
    facts = turn.facts
    if chosen is not None and facts is not None and (
        (match is not None and facts.match != match) or (agree is not None and facts.agree != agree)
    ):
        return HumanTurn(chosen, "", None, chosen=True,
                         refused=_contradiction(chosen, match, agree, facts))
    return turn


def _yes(v: bool | None) -> str:
    return "unanswered" if v is None else ("Yes" if v else "No")


def _contradiction(chosen: Tag, match: bool | None, agree: bool | None, facts: Facts) -> str:
    """Why a chosen tag is refused when it says otherwise than the expert's own answers."""
    return (f"{chosen.value} contradicts your answers (prediction matches: {_yes(match)}, "
            f"explanation agrees: {_yes(agree)}); it means {_yes(facts.match)} / "
            f"{_yes(facts.agree)}: change your answers or pick Auto (Alt+0)")


def _human_turn(
    j: int, k: int, *, match: bool | None, agree: bool | None, changed: bool,
    chosen: Tag | None, new_prediction_matches: bool | None,
) -> HumanTurn:
    """human_turn before the contradiction check (`changed` already limited to j > 2)."""
    if chosen is None and (match is None or agree is None):
        return HumanTurn(None, "", None,
                         refused="answer both questions above, or pick a tag yourself")
    if chosen is not None and (match is None or agree is None):
        try:
            m, a, c = implied_facts(chosen, j, k, match=match, agree=agree)
        except ProtocolError:
            reason = check_tag(chosen, j, k, bool(match), bool(agree), changed)
            return HumanTurn(chosen, "", None, chosen=True,
                             refused=reason or f"{chosen.value} is not allowed here")
        if c != changed:
            reason = check_tag(chosen, j, k, m, a, changed)
            return HumanTurn(chosen, "", None, chosen=True,
                             refused=reason or _changed_reason(chosen, changed))
        match, agree = m, a
    assert match is not None and agree is not None
    if chosen is None:
        try:
            tag = agent_tag(j, k, match, agree, changed)
        except ProtocolError as err:
            return HumanTurn(None, "", None, refused=str(err))
        return HumanTurn(tag, tag_reason(j, k, match, agree, changed), Facts(match, agree, changed))
    if chosen is Tag.RATIFY and changed and new_prediction_matches is False:
        return HumanTurn(
            chosen, "", None, chosen=True,
            refused="RATIFY needs your prediction to match the machine's; your edited "
                    "prediction no longer does",
        )
    reason = check_tag(chosen, j, k, match, agree, changed)
    if reason is None:
        return HumanTurn(
            chosen, f"you chose it; {tag_reason(j, k, match, agree, changed)}",
            Facts(match, agree, changed, tag=chosen), chosen=True,
        )
    try:
        m, a, c = implied_facts(chosen, j, k, match=match, agree=agree)
    except ProtocolError:
        return HumanTurn(chosen, "", None, refused=reason, chosen=True)
    if c != changed:
        return HumanTurn(chosen, "", None, refused=reason, chosen=True)
    return HumanTurn(
        chosen,
        f"you chose it; recorded as: {tag_reason(j, k, m, a, c)}",
        Facts(m, a, c, tag=chosen),
        chosen=True,
    )


def label_options(labels: list[str], *extra: str) -> list[str]:
    """The label picker's options: the dataset's labels plus any other label seen."""
    out = list(labels)
    seen = {normalise_label(x) for x in out}
    for e in extra:
        if e.strip() and normalise_label(e) not in seen:
            out.append(e.strip())
            seen.add(normalise_label(e))
    return out
