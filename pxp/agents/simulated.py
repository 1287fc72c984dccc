"""A seeded simulated machine-agent for runs and demos with no API key (DESIGN §5; docs/annotating.md, the
simulated agent).

It answers correctly at first with probability `accuracy`, which rises with each carried-over session
(`learn_rate`), and adopts the other agent's correction with probability `adopt`. It behaves like a model, not
like a shuffler: its prediction and explanation always belong together. A correct answer is argued with the
case's own text; a wrong one is another plausible finding argued as such (the text of another case with that
finding; for a synthesis, the case's own molecules with the altered reagents). When it revises toward the other
agent it takes the other's prediction and argues it in its own words (a text of the dataset for that
prediction), never copying the other's explanation. A carried session that did not end ratified can mislead it
(`mislead`, off by default), so LEARN has something to refuse. Every random draw is keyed by
(seed, instance, j), so results do not depend on scheduling or concurrency.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pxp.agents.base import AgentBase, Answer, CallRecord, InstanceView, Query
from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.llm.limits import call_slot
from pxp.protocols.pxp.common_ground import truth
from pxp.protocols.pxp.rules import Sender, Tag, stop_reason
from pxp.tasks.base import (
    DEFAULT_AGREE_THRESHOLD,
    lexical_agree,
    match_for,
    task_match_kind,
)

SIMULATED_LABEL = "simulated"


@dataclass(frozen=True)
class SimulatedConfig:
    """Parameters of the simulated machine (stored with the experiment)."""

    seed: int = 0
    accuracy: float = 0.6
    adopt: float = 0.7
    learn_rate: float = 0.05
    agree_threshold: float = DEFAULT_AGREE_THRESHOLD
    #: how much each carried session that did not end ratified misleads it (0 = never)
    mislead: float = 0.0
    #: seconds slept per ask, holding a shared call slot like an LLM call (benchmarks, tests)
    latency: float = 0.0
    #: probability of answering a common-ground probe correctly (docs/research.md, Common-ground probe)
    probe_accuracy: float = 0.8


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def alter_reactants(smiles: str, rng: random.Random) -> str:
    """A plausible wrong reactant set: swap a halogen, or change a leaving group."""
    swaps = [("Br", "Cl"), ("Cl", "Br"), ("I", "Br"), ("O", "N"), ("N", "O"), ("C(=O)O", "C(=O)Cl")]
    rng.shuffle(swaps)
    for a, b in swaps:
        if a in smiles:
            candidate = smiles.replace(a, b, 1)
            try:
                if smiles_set(candidate) != smiles_set(smiles):
                    return candidate
            except InvalidSmiles:
                continue
    return smiles + ".O"


class SimulatedMachine(AgentBase):
    """The simulated machine-agent; `pool` holds the dataset's instances for wrong answers."""

    label = SIMULATED_LABEL

    def __init__(self, pool: Sequence[InstanceView], config: SimulatedConfig | None = None) -> None:
        self.config = config or SimulatedConfig()
        self.pool = list(pool)
        self.labels = sorted({p.reference.prediction for p in self.pool if p.reference.prediction})
        self._wrong_labels: dict[str, list[str]] = {}  # reference prediction -> the labels that do not match it
        self._by_label: dict[str, list[tuple[int, str]]] | None = None  # prediction -> (case, its text)

    # ASK ------------------------------------------------------------------------------
    def _texts(self, label: str, x: InstanceView, avoid: frozenset[str]) -> list[str]:
        """The dataset's own texts that argue `label` (this case's first, when it is its finding), without `avoid`."""
        if self._by_label is None:
            self._by_label = {}
            for p in self.pool:
                if p.reference.prediction and p.reference.explanation.strip():
                    self._by_label.setdefault(p.reference.prediction, []).append((p.id, p.reference.explanation))
        found = self._by_label.get(label)
        if found is None:  # a label written another way (case, order): found once by MATCH, then kept
            found = [t for key, texts in self._by_label.items() if self.match(label, key, None) for t in texts]
            self._by_label[label] = found
        own = [x.reference.explanation] if x.reference.explanation.strip() and self.match(
            label, x.reference.prediction, None) else []
        return [e for e in dict.fromkeys(own + [e for pid, e in found if pid != x.id]) if e not in avoid]

    def argue(self, x: InstanceView, prediction: str, rng: random.Random, *, avoid: frozenset[str] = frozenset(),
              own_first: bool = True) -> str:
        """An explanation written for `prediction` of case x (see the module docstring)."""
        if task_match_kind(x.task, x.meta) == "smiles":
            return self._argue_synthesis(x, prediction, avoid)
        texts = self._texts(prediction, x, avoid)
        if texts:
            return texts[0] if own_first and texts[0] == x.reference.explanation else rng.choice(texts)
        return f"The appearances are most consistent with {prediction}."

    def _argue_synthesis(self, x: InstanceView, prediction: str, avoid: frozenset[str]) -> str:
        """A one-step synthesis argued with the case's own molecules: its textbook disconnection, with the
        reagents this prediction changes named; a template naming the target where that text is not to be used."""
        own = x.reference.explanation
        if not own.strip() or own in avoid:
            name = str(x.meta.get("name") or x.label or "the target")
            return (f"One-step disconnection of {name} ({x.payload}) into {prediction}: the bond the textbook route "
                    "forms is made from these reactants.")
        if self.match(prediction, x.reference.prediction, None):
            return own
        try:
            mine, ref = smiles_set(prediction), smiles_set(x.reference.prediction)
        except InvalidSmiles:
            return f"{own} Proposed reactants: {prediction}."
        added, removed = sorted(mine - ref), sorted(ref - mine)
        if added and removed:
            return f"{own} Here with {', '.join(added)} in place of {', '.join(removed)}."
        return f"{own} Proposed reactants: {prediction}."

    def _wrong(self, x: InstanceView, rng: random.Random) -> Answer:
        """Another plausible finding (or reagent set), argued as such."""
        others = [p for p in self.pool if p.id != x.id] or [x]
        kind = task_match_kind(x.task, x.meta)
        if kind == "smiles":
            try:
                prediction = alter_reactants(x.reference.prediction, rng)
            except InvalidSmiles:
                prediction = rng.choice(others).reference.prediction
        else:
            ref = x.reference.prediction
            wrong = self._wrong_labels.get(ref)
            if wrong is None:
                wrong = self._wrong_labels[ref] = [lab for lab in self.labels if not self.match(lab, ref, None)]
            prediction = rng.choice(wrong) if wrong else rng.choice(others).reference.prediction
        return Answer(prediction, self.argue(x, prediction, rng))

    def initial(self, x: InstanceView, carried: int, *, salt: str = "", misleading: int = 0) -> Answer:
        """The first answer for x after `carried` kept sessions (also used to evaluate).

        `misleading` of them did not end ratified; each scales the accuracy by 1 - mislead.
        """
        c = self.config
        p = (1 - (1 - c.accuracy) * (1 - c.learn_rate) ** carried) * (1 - c.mislead) ** misleading
        rng = _rng(c.seed, x.id, "init", salt)
        correct = rng.random() < p
        wrong = self._wrong(x, rng)
        if correct:
            return Answer(x.reference.prediction, self.argue(x, x.reference.prediction, rng))
        # now and then the right finding argued less well: another case's text for it, not this case's
        if rng.random() < 0.25 and task_match_kind(x.task, x.meta) != "smiles":
            return Answer(x.reference.prediction, self.argue(x, x.reference.prediction, rng,
                                                             avoid=frozenset({x.reference.explanation})))
        return wrong

    def ask(self, q: Query) -> Answer:
        latency = self.config.latency
        if latency > 0:
            with call_slot():
                time.sleep(latency)
        q.calls.append(
            CallRecord(provider="simulated", model="simulated", purpose="ask", latency_ms=latency * 1000)
        )
        x = q.instance
        if q.j == 1 or q.own_previous is None:
            misleading = sum(1 for c in q.carry if stop_reason(c.messages, len(c.messages)) != "ratified")
            return self.initial(x, len(q.carry), misleading=misleading if self.config.mislead else 0)
        own, other = q.own_previous, q.other_last
        assert other is not None
        mine = Answer(own.prediction, own.explanation)
        if other.tag in (Tag.REFUTE, Tag.REVISE, Tag.REJECT):
            rng = _rng(self.config.seed, x.id, "adopt", q.j, len(q.carry))
            if rng.random() < self.config.adopt:  # the other's finding, argued in its own words
                # never the other's own words; the dataset's text for this case is the machine's to use too
                said = frozenset(m.explanation for m in q.history if m.sender is not Sender.MACHINE)
                return Answer(other.prediction, self.argue(x, other.prediction, rng,
                                                           avoid=said - {x.reference.explanation}))
        return mine

    # PROBE ----------------------------------------------------------------------------
    def probe(self, q: Query, question: str) -> bool | None:
        """A private yes/no answer about the session so far: right with probability `probe_accuracy`.

        q.history holds the messages up to the human message q.j - 1 just probed.
        """
        q.calls.append(CallRecord(provider="simulated", model="simulated", purpose="probe"))
        j = len(q.history)
        t = truth(question, q.history, j, lambda a, b: self.match(a, b, q))
        if t is None:
            return None
        rng = _rng(self.config.seed, q.instance.id, "probe", j, question)
        return t if rng.random() < self.config.probe_accuracy else not t

    # MATCH / AGREE --------------------------------------------------------------------
    def match(self, y1: str, y2: str, q: Query | None) -> bool:
        task = q.instance.task if q is not None else (self.pool[0].task if self.pool else "text")
        try:
            return match_for(task_match_kind(task))(y1, y2)
        except InvalidSmiles:
            return False

    def agree(self, e1: str, e2: str, q: Query | None) -> bool:
        return lexical_agree(e1, e2, self.config.agree_threshold)
