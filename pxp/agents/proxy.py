"""The database human-proxy: answers with the instance's reference (an oracle).

MATCH against the reference with the task's MATCH; AGREE with the offline lexical
similarity (or any AGREE function given). Its answer never changes, so it never
sends REVISE (DESIGN §1).
"""

from __future__ import annotations

from collections.abc import Callable

from pxp.agents.base import AgentBase, Answer, Query
from pxp.tasks.base import DEFAULT_AGREE_THRESHOLD, lexical_agree, match_for, task_match_kind

AgreeFn = Callable[[str, str], bool]
#: the proxy's explanation for a case whose dataset stores none: its messages always say why
NO_REASON = "The expert database gives {prediction} for this case and stores no explanation for it."


class HumanProxy(AgentBase):
    """The human agent of controlled experiments: a database of expert answers."""

    label = "proxy"

    def __init__(
        self,
        *,
        agree_threshold: float = DEFAULT_AGREE_THRESHOLD,
        agree_fn: AgreeFn | None = None,
        match_kind: str | None = None,
    ) -> None:
        self.threshold = agree_threshold
        self._agree = agree_fn
        self._match_kind = match_kind

    def ask(self, q: Query) -> Answer:
        ref = q.instance.reference
        if ref.explanation.strip():
            return ref
        # a disagreement carries its reason (docs/protocol.md): a case stored without one says so in words
        return Answer(ref.prediction, NO_REASON.format(prediction=ref.prediction))

    def match(self, y1: str, y2: str, q: Query) -> bool:
        return match_for(self._match_kind or task_match_kind(q.instance.task))(y1, y2)

    def agree(self, e1: str, e2: str, q: Query) -> bool:
        if self._agree is not None:
            return self._agree(e1, e2)
        return lexical_agree(e1, e2, self.threshold)
