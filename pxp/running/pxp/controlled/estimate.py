"""The cost of a controlled run before it starts (docs/research.md, Cost estimate): calls, tokens and US dollars.

Arithmetic over the config, the dataset's split sizes and prompt lengths, and the pricing table
(pxp.llm.pricing). The call counts follow what the runner does (pxp.running.pxp.controlled.runner, evaluate):

- each session: one ASK per machine message (the papers' INTERACT, j = 1, 3, 5, ... ≤ n);
  with a checker LLM, AGREE calls on the human's messages (pxp.agents.checker);
- machine performance: one ASK per test instance (and one AGREE with a checker LLM) after every
  `eval_every`-th session and after the last, when a session kept since the previous checkpoint
  changed the carried context (pxp.running.pxp.controlled.repetition), on the `eval_sample` sample when set;
  before session 1 with `eval_at_start`;
- LEARN: the validation set (`learn_sample` of it when set) once before the first decision,
  then once per session with that session's context added (the follow-up paper's Method);
- with `--probe` (pxp.running.pxp.controlled.probes): after each human message, one call per common-ground
  question decidable there (all three of QUESTIONS for the protocol's human messages), its prompt
  the session so far and the question, with no carried context.

The carry policy (`all`, `last:M`, `tokens:T`, pxp.running.pxp.controlled.learn.select_carry) bounds the kept
sessions in each prompt, so input tokens grow with the session number up to that bound. What is
not known before the run (how long sessions are, how many are kept, how long answers are) is an
assumption, listed with the estimate. For the simulated machine the evaluation calls are exact
when every session is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine

from pxp.agents.llm import ASIDE
from pxp.llm.base import is_llm_spec, parse_spec
from pxp.llm.pricing import CHECKED, Price, price_of
from pxp.protocols.pxp.common_ground import QUESTIONS, question_text
from pxp.protocols.scorekeeping.rules import MAX_PROBE_ATTEMPTS, probe_prompt
from pxp.running.pxp.config import Carry, RunConfig, RunError, parse_carry
from pxp.running.pxp.controlled.learn import MESSAGE_OVERHEAD
from pxp.running.pxp.controlled.repetition import eval_due
from pxp.storage.store import dataset_instances, db_session, find_dataset
from pxp.storage.tables import Experiment

CHARS_PER_TOKEN = 4.0
KEYS = ("calls", "tokens_in", "tokens_out")
#: the row of the common-ground probe's calls (LLMCall purpose "probe")
PROBES = "common-ground probes"


@dataclass(frozen=True)
class Assumptions:
    """The figures the estimate cannot know before the run (each listed with the estimate)."""

    #: share of sessions that run to the message bound n; the others end after one of
    #: `short_lengths` messages, equally often (a ratify at 3 or 5, a reject at 4)
    reach_n: float = 0.1
    short_lengths: tuple[int, ...] = (3, 4, 5)
    #: share of sessions whose context is kept (LEARN drops some; 1 = every one, an upper bound)
    keep_share: float = 1.0
    #: checker calls per human message and per evaluated instance (repeated pairs are not re-asked)
    checker_per_message: float = 1.0
    #: tokens the tag's phrasing adds to each message of a carried session or the exchange
    phrasing_tokens: int = 30
    #: tokens of one image (Anthropic: width × height / 750, about 1,600 at most)
    image_tokens: int = 1600
    #: output tokens of one checker verdict (Yes or No)
    checker_out_tokens: int = 3
    #: attempts per common-ground probe (an invalid reply is asked again, up to MAX_PROBE_ATTEMPTS)
    probe_attempts: float = 1.0
    #: output tokens of one probe reply (ASIDE: yes)
    probe_out_tokens: int = 4


@dataclass(frozen=True)
class DatasetFacts:
    """What the estimate needs of the dataset: split sizes and mean prompt lengths (characters)."""

    interact: int
    val: int
    test: int
    system_chars: int = 2400
    instance_chars: int = 400
    short_chars: int = 120
    answer_chars: int = 500
    explanation_chars: int = 400
    checker_chars: int = 600
    image: bool = False
    max_tokens: int = 300
    checker: str = "lexical"
    measured: bool = False


@dataclass(frozen=True)
class Row:
    """One kind of call of one repetition: calls, tokens and cost (None: price unknown)."""

    what: str
    purpose: str
    calls: float
    tokens_in: float
    tokens_out: float
    usd: float | None


@dataclass(frozen=True)
class Estimate:
    """The estimate of one repetition (`rows`) and of all `reps`, with its assumptions."""

    reps: int
    rows: list[Row]
    assumptions: list[str] = field(default_factory=list)
    #: the LLM specs (machine, checker) pxp has no price for: the cost is then unknown, never zero
    unpriced: tuple[str, ...] = ()

    def _sum(self, key: str) -> float:
        return sum(float(getattr(r, key)) for r in self.rows)

    @property
    def rep_usd(self) -> float | None:
        costs = [r.usd for r in self.rows if r.calls]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def calls(self) -> int:
        return round(self._sum("calls") * self.reps)

    @property
    def tokens_in(self) -> int:
        return round(self._sum("tokens_in") * self.reps)

    @property
    def tokens_out(self) -> int:
        return round(self._sum("tokens_out") * self.reps)

    @property
    def usd(self) -> float | None:
        rep = self.rep_usd
        return None if rep is None else round(rep * self.reps, 6)

    def by_purpose(self) -> dict[str, dict[str, float]]:
        """Calls and tokens of all repetitions per LLMCall purpose (ask, agree, eval, probe)."""
        out: dict[str, dict[str, float]] = {}
        for r in self.rows:
            d = out.setdefault(r.purpose, dict.fromkeys(KEYS, 0.0))
            for k in KEYS:
                d[k] += getattr(r, k) * self.reps
        return {p: {k: round(v) for k, v in d.items()} for p, d in out.items()}

    def as_json(self) -> dict[str, Any]:
        rep_usd = self.rep_usd
        return {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "usd": self.usd,
            "assumptions": list(self.assumptions),
            "unpriced": list(self.unpriced),
            "repetitions": self.reps,
            "per_repetition": {k: round(self._sum(k)) for k in KEYS}
            | {"usd": None if rep_usd is None else round(rep_usd, 6)},
            "by_purpose": self.by_purpose(),
            "rows": [asdict(r) | {k: round(getattr(r, k)) for k in KEYS} for r in self.rows],
        }


def _tokens(chars: float) -> float:
    return chars / CHARS_PER_TOKEN


def _cost(price: Price | None, tokens_in: float, tokens_out: float, free: bool) -> float | None:
    if free or price is None:
        return 0.0 if free else None
    return (tokens_in * price.input + tokens_out * price.output) / 1_000_000


def session_messages(n: int, a: Assumptions) -> list[tuple[float, int, int]]:
    """(share, machine messages, human messages) of each session length the assumptions name.

    A session of L ≤ n messages has ceil(L/2) machine messages (j = 1, 3, ...) and floor(L/2)
    human ones.
    """
    short = (1 - a.reach_n) / len(a.short_lengths) if a.short_lengths else 0.0
    lengths = [(a.reach_n, n), *((short, min(n, x)) for x in a.short_lengths)]
    return [(p, math.ceil(x / 2), x // 2) for p, x in lengths if p]


def carried_count(kept: float, policy: Carry, session_tokens: float) -> float:
    """How many of `kept` sessions a prompt carries under the policy (select_carry, mean session size)."""
    kind, value = policy
    if kind == "last" and value:
        return min(kept, float(value))
    if kind == "tokens" and value and session_tokens > 0:
        return min(kept, float(math.floor(value / session_tokens)))
    return kept


def estimate(cfg: RunConfig, facts: DatasetFacts, a: Assumptions | None = None) -> Estimate:
    """The expected calls, tokens and cost of the run `cfg` on a dataset described by `facts`."""
    a = a or Assumptions()
    llm = is_llm_spec(cfg.machine)
    checker = is_llm_spec(facts.checker)
    m_price = price_of(*parse_spec(cfg.machine)) if llm else None
    c_price = price_of(*parse_spec(facts.checker)) if checker else None
    S, V, T = facts.interact, facts.val if cfg.learn else 0, facts.test if cfg.test_split else 0
    V, T = min(V, cfg.learn_sample or V), min(T, cfg.eval_sample or T)  # the seeded samples
    kinds = session_messages(cfg.n, a)
    machine_msgs = sum(p * m for p, m, _ in kinds)
    human_msgs = sum(p * h for p, _, h in kinds)
    # the ASK at machine message i (j = 2i - 1) also carries the j - 1 messages of the exchange
    history = sum(p * m * (m - 1) for p, m, _ in kinds)
    msg = _tokens(facts.answer_chars) + a.phrasing_tokens
    out_tokens = min(_tokens(facts.answer_chars), float(cfg.max_tokens or facts.max_tokens)) if llm else 0.0
    carried_tokens = _tokens(facts.short_chars) + 10 + (machine_msgs + human_msgs) * msg
    fixed = _tokens(facts.system_chars + facts.instance_chars) + (a.image_tokens if facts.image else 0)
    check_in = (_tokens(facts.checker_chars + 2 * facts.explanation_chars) + 25) if checker else 0.0
    check_out = float(a.checker_out_tokens) if checker else 0.0
    acc: dict[str, list[float | None]] = {}

    def add(what: str, calls: float, tin: float, tout: float, *, check: bool = False) -> None:
        usd = _cost(c_price, tin, tout, not checker) if check else _cost(m_price, tin, tout, not llm)
        row = acc.setdefault(what, [0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate((calls, tin, tout)):
            row[i] = (row[i] or 0.0) + v
        row[3] = None if row[3] is None or usd is None else row[3] + usd

    def asks(what: str, calls: float, carried: float, history_tokens: float = 0.0) -> None:
        tin = calls * (fixed + carried * carried_tokens) + history_tokens if llm else 0.0
        add(what, calls, tin, calls * out_tokens)

    def evaluation(what: str, instances: float, carried: float) -> None:
        asks(what, instances, carried)
        if checker:
            calls = instances * a.checker_per_message
            add(what, calls, calls * check_in, calls * check_out, check=True)

    # what select_carry counts of one carried session (its case, image and messages), for tokens:T
    select = (_tokens(facts.instance_chars) + (a.image_tokens if facts.image else 0)
              + (machine_msgs + human_msgs) * (_tokens(facts.answer_chars) + MESSAGE_OVERHEAD))
    policy = parse_carry(cfg.carry)
    if cfg.eval_at_start and T:
        evaluation("test evaluations", T, 0)
    kept, prev = 0.0, 0
    share = a.keep_share if (cfg.learn and V) else 1.0
    for s in range(1, S + 1):
        asks("session messages", machine_msgs, carried_count(kept, policy, select), history * msg)
        if checker:
            calls = human_msgs * a.checker_per_message
            add("session checks", calls, calls * check_in, calls * check_out, check=True)
        if V:
            if s == 1:
                evaluation("LEARN validation", V, 0)
            evaluation("LEARN validation", V, carried_count(kept + 1, policy, select))
        kept += share
        if T and eval_due(s, S, cfg.eval_every):
            # evaluated iff a session since the previous checkpoint was kept (pxp.running.pxp.controlled.repetition)
            due = 1 - (1 - share) ** (s - prev)
            evaluation("test evaluations", T * due, carried_count(kept, policy, select))
            prev = s
    if cfg.probe:
        probes(add, S, kinds, fixed, msg, a, llm=llm)
    purpose = {"session messages": "ask", "session checks": "agree", PROBES: "probe"}
    rows = [Row(what, purpose.get(what, "eval"), float(c or 0), float(ti or 0), float(to or 0), usd)
            for what, (c, ti, to, usd) in acc.items()]
    unpriced = tuple(dict.fromkeys(spec for spec, used, price in ((cfg.machine, llm, m_price),
                                                                  (facts.checker, checker, c_price))
                                   if used and price is None))
    return Estimate(cfg.reps, rows, assumptions(cfg, facts, a, llm=llm, checker=checker), unpriced)


def probes(add: Callable[[str, float, float, float], None], sessions: int, kinds: list[tuple[float, int, int]],
           fixed: float, msg: float, a: Assumptions, *, llm: bool) -> None:
    """The common-ground probe's calls (`--probe`, pxp.running.pxp.controlled.probes): per human message, one call per
    question; the probe after human message j = 2i carries the session's first j messages, no carried context."""
    q = len(QUESTIONS) * a.probe_attempts
    asked = _tokens(len(ASIDE) + sum(len(probe_prompt(question_text(k), 1)) for k in QUESTIONS) / len(QUESTIONS))
    calls = sessions * q * sum(p * h for p, _, h in kinds)
    history = sum(p * h * (h + 1) for p, _, h in kinds) * msg  # Σ_i 2i messages over the h human ones
    tin = sessions * q * (sum(p * h for p, _, h in kinds) * (fixed + asked) + history) if llm else 0.0
    add(PROBES, calls, tin, calls * a.probe_out_tokens if llm else 0.0)


def assumptions(cfg: RunConfig, facts: DatasetFacts, a: Assumptions, *, llm: bool, checker: bool) -> list[str]:
    """The figures of the estimate that are assumptions, in words."""
    out = [
        f"sessions: {a.reach_n:.0%} run to n = {cfg.n} messages, the others end after "
        f"{' or '.join(str(min(cfg.n, x)) for x in a.short_lengths)} messages equally often "
        "(a ratify at 3 or 5, a reject at 4)",
        "no session is aborted and no answer is re-asked for its format",
    ]
    if cfg.learn and facts.val:
        out.append(f"LEARN keeps {a.keep_share:.0%} of the sessions' contexts (the test set is evaluated at a "
                   "checkpoint only when a session since the previous checkpoint was kept)")
    out += schedule_lines(cfg)
    if llm:
        src = "measured on the dataset" if facts.measured else "defaults (the dataset was not measured)"
        kind, value = parse_carry(cfg.carry)
        bound = ("every kept session is carried in every later prompt (no limit)" if value is None else
                 f"the last {value} kept sessions are carried in every later prompt" if kind == "last" else
                 f"the latest kept sessions that fit {value:,} tokens (of the mean size) are carried")
        out += [
            f"{CHARS_PER_TOKEN:g} characters per token; prompt lengths {src}",
            "the machine's answers are as long as the reference answers",
            f"{bound}, priced at the full input rate (prompt caching only lowers it)",
        ]
        if facts.image:
            out.append(f"{a.image_tokens} tokens per image")
        if price_of(*parse_spec(cfg.machine)) is None:
            out.append(f"no price is known for {cfg.machine}: the cost is unknown (null)")
    if cfg.probe:
        out.append(f"--probe: {len(QUESTIONS)} private questions after each human message, {a.probe_attempts:g} "
                   f"attempt each (an invalid reply is asked again, up to {MAX_PROBE_ATTEMPTS}); the prompt is the "
                   "session so far, no carried context" + (f", {a.probe_out_tokens} output tokens" if llm else ""))
    if checker:
        out.append(f"{a.checker_per_message:g} checker call per human message and per evaluated instance")
    if llm or checker:
        out.append(f"list prices of {CHECKED} (pxp.llm.pricing)")
    else:
        out.append("the simulated machine and the lexical AGREE make no paid calls: tokens and cost are 0")
    return out


def schedule_lines(cfg: RunConfig) -> list[str]:
    """The evaluation schedule and carry policy, in words, when they are not the paper's (docs/research.md, Evaluation
    schedules)."""
    out = []
    if cfg.test_split and (cfg.eval_every != 1 or cfg.eval_sample):
        out.append(f"schedule (not the paper's): machine performance {cfg.schedule_text()}")
    if cfg.learn and cfg.val_split and cfg.learn_sample:
        out.append(f"schedule (not the paper's): LEARN validates on a seeded sample of {cfg.learn_sample} "
                   f"{cfg.val_split} cases")
    if parse_carry(cfg.carry)[0] != "all":
        out.append(f"carried context (not the paper's): --carry {cfg.carry}")
    return out


def dataset_facts(engine: Engine, cfg: RunConfig) -> DatasetFacts:
    """Split sizes (as create_experiment resolves them) and mean prompt lengths of the dataset."""
    from pxp.tasks.registry import task_spec

    with db_session(engine) as db:
        ds = find_dataset(db, name=cfg.dataset)
        if ds is None or ds.id is None:
            raise RunError(f"no dataset named {cfg.dataset!r}; import one or run `pxp demo`")
        inter = dataset_instances(db, dataset_id=ds.id, split=cfg.split)
        val = len(dataset_instances(db, dataset_id=ds.id, split=cfg.val_split)) if cfg.val_split else 0
        test = len(dataset_instances(db, dataset_id=ds.id, split=cfg.test_split)) if cfg.test_split else 0
        labels = sorted({i.reference_prediction for i in dataset_instances(db, dataset_id=ds.id)
                         if i.reference_prediction})
        task, ds_config = ds.task, dict(ds.config or {})
    checker = cfg.checker
    base = DatasetFacts(len(inter), val, test, checker=checker)
    try:
        spec = task_spec(task, ds_config, labels)
    except Exception:  # a task config that cannot build prompts: the run reports it; estimate with defaults
        return base
    if "task_config" in ds_config:  # as pxp.running.pxp.factory resolves AGREE for a custom task
        if spec.agree_kind == "lexical":
            checker = "lexical"
        elif checker == "lexical" and is_llm_spec(cfg.machine):
            checker = cfg.machine
    if not inter:
        return DatasetFacts(0, val, test, checker=checker)

    def mean(xs: Sequence[int]) -> int:
        return round(sum(xs) / len(xs))

    return DatasetFacts(
        len(inter), val, test,
        system_chars=len(spec.system_prompt()),
        instance_chars=mean([len(spec.instance_text(i.payload)) for i in inter]),
        short_chars=mean([len(spec.short(i.payload)) for i in inter]),
        answer_chars=mean([len(spec.answer_text(i.reference_prediction, i.reference_explanation)) for i in inter]),
        explanation_chars=mean([len(i.reference_explanation) for i in inter]),
        checker_chars=len(spec.checker_prompt()), image=spec.image,
        max_tokens=spec.max_tokens, checker=checker, measured=True,
    )


def store_estimate(engine: Engine, experiment_id: int, est: Estimate) -> None:
    """Keep the estimate in the experiment's config (config["estimate"]) for the report."""
    with db_session(engine) as db:
        exp = db.get(Experiment, experiment_id)
        if exp is not None:
            exp.config = {**exp.config, "estimate": est.as_json()}
            db.add(exp)
