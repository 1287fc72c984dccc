"""Game instances: pxp's seeded generator for the paper's two domains, and clembench's instances.json.

Generation follows clembench's privateshared/instancegenerator.py (a random value per slot, a random
request order, a random request wording per slot, a random probe wording per slot and round), with
pxp's own prompt texts and value lists. Unlike clembench, whose probes follow the fixed key order of
probing_questions.json, pxp shuffles the probing order of every round, as the paper describes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pxp.protocols.scorekeeping import rules
from pxp.protocols.text import TextRefused, clean_name


class InstanceError(rules.ScorekeepingError):
    """An instance (or an instances.json structure) is malformed; the message names the field."""


@dataclass(frozen=True)
class Requirement:
    """A coherence rule of a domain: when `slot` has one of `values`, `then` must be one of `allowed`."""

    slot: str
    values: frozenset[str]
    then: str
    allowed: frozenset[str]
    why: str

    def broken(self, slots: Mapping[str, str]) -> bool:
        return slots.get(self.slot) in self.values and slots.get(self.then) not in self.allowed


def _req(slot: str, values: Sequence[str], then: str, allowed: Sequence[str], why: str) -> Requirement:
    return Requirement(slot, frozenset(values), then, frozenset(allowed), why)


@dataclass(frozen=True)
class Domain:
    """One experiment of the game: questioner tag, slot values and texts, and the rules that keep an
    instance's values coherent (a class only for a mode that has it, a mode only on a route it serves)."""

    name: str
    tag: str
    what: str
    role: str
    questioner: str
    values: Mapping[str, Sequence[str]]
    requests: Mapping[str, Sequence[str]]
    probe_questions: Mapping[str, Sequence[str]]
    requirements: Sequence[Requirement] = ()

    def incoherent(self, slots: Mapping[str, str]) -> list[str]:
        """Why these slot values do not go together (empty when they do)."""
        return [f"{r.slot} {slots[r.slot]!r} with {r.then} {slots.get(r.then)!r}: {r.why}"
                for r in self.requirements if r.broken(slots)]


_SURFACE = ("train", "sleeper train", "coach")


TRAVEL = Domain(
    name="travel-booking",
    tag="TRAVEL-AGENT",
    what="Travel",
    role="a customer who wants to book a trip with a travel agency",
    questioner="travel agent",
    values={
        "from": ["Lisbon", "Glasgow", "Krakow", "Bologna", "Tallinn", "Valencia"],
        "to": ["Reykjavik", "Marseille", "Dubrovnik", "Helsinki", "Edinburgh", "Thessaloniki"],
        "by": ["train", "plane", "coach", "ferry", "sleeper train"],
        "class": ["first class", "economy", "business", "second class", "the cheapest fare", "a sleeper cabin",
                  "a reclining seat"],
        "when": ["next Tuesday", "in early June", "on 3 October", "this weekend", "in late February"],
    },
    requests={
        "from": ["Where will you be travelling from?", "What is your departure city?"],
        "to": ["Where do you want to go?", "What is your destination?"],
        "by": ["How would you like to travel?", "Which means of transport do you prefer?"],
        "class": ["Which class would you like to travel in?", "What kind of ticket do you want?"],
        "when": ["When do you want to leave?", "When would you like to depart?"],
    },
    probe_questions={
        "from": ["Does the travel agent know where you are travelling from?",
                 "Has the travel agent been told your departure city?"],
        "to": ["Does the travel agent know where you want to go?",
               "Has the travel agent been informed about your destination?"],
        "by": ["Does the travel agent know how you want to travel?",
               "Has the travel agent been told your means of transport?"],
        "class": ["Does the travel agent know which class you want?",
                  "Has the travel agent been informed about your travel class?"],
        "when": ["Does the travel agent know when you want to leave?",
                 "Has the travel agent been told your departure date?"],
    },
    requirements=(
        _req("by", ["plane"], "class", ["first class", "economy", "business", "the cheapest fare"],
             "planes sell first, business and economy seats"),
        _req("by", ["train"], "class", ["first class", "second class", "the cheapest fare"],
             "day trains have first and second class"),
        _req("by", ["sleeper train"], "class", ["a sleeper cabin", "a reclining seat", "the cheapest fare"],
             "sleeper trains sell cabins and seats"),
        _req("by", ["coach"], "class", ["a reclining seat", "the cheapest fare"], "coaches have one class"),
        _req("by", ["ferry"], "class", ["a sleeper cabin", "a reclining seat", "the cheapest fare"],
             "ferries sell cabins and seats"),
        _req("by", ["ferry"], "from", ["Tallinn"], "the only ferry route served is Tallinn to Helsinki"),
        _req("by", ["ferry"], "to", ["Helsinki"], "the only ferry route served is Tallinn to Helsinki"),
        _req("to", ["Reykjavik"], "by", ["plane"], "Iceland is reached by plane"),
        _req("to", ["Helsinki"], "by", ["plane", "ferry"], "Helsinki is across the sea from these cities"),
        _req("to", ["Dubrovnik"], "by", ["plane", "coach"], "no railway reaches Dubrovnik"),
        _req("from", ["Glasgow"], "to", ["Reykjavik", "Marseille", "Dubrovnik", "Helsinki", "Thessaloniki"],
             "Edinburgh is an hour from Glasgow: no trip to book"),
    ),
)

JOB = Domain(
    name="job-interview",
    tag="RECRUITER",
    what="Job Application",
    role="a job applicant in an interview with a recruiter",
    questioner="recruiter",
    values={
        "bachelor": ["Bachelor of Arts in History", "Bachelor of Science in Biology",
                     "Bachelor in Mechanical Engineering", "Bachelor of Fine Arts", "Bachelor in Economics"],
        "industry experience": ["two years as a nurse", "five years in retail banking",
                                "eight months at a start-up", "three years of logistics work",
                                "no industry experience"],
        "highest education": ["Master in Data Science", "PhD in Linguistics", "MBA",
                              "Master of Public Health", "Master in Teaching"],
        "other skills": ["fluent Portuguese", "web design", "public speaking", "first aid certificate",
                         "forklift licence"],
        "availability": ["from next month", "immediately", "after a notice period of six weeks",
                         "part-time only", "from January"],
    },
    requests={
        "bachelor": ["What did you study for your bachelor?", "Which bachelor degree do you hold?"],
        "industry experience": ["What industry experience do you have?", "Tell me about your work experience."],
        "highest education": ["What is your highest degree?", "What is the highest level of education you completed?"],
        "other skills": ["Do you have any other skills?", "What else can you bring to the job?"],
        "availability": ["When could you start?", "What is your availability?"],
    },
    probe_questions={
        "bachelor": ["Does the recruiter know about your bachelor?",
                     "Has the recruiter been informed about your bachelor degree?"],
        "industry experience": ["Does the recruiter know about your industry experience?",
                                "Has the recruiter been told about your work experience?"],
        "highest education": ["Does the recruiter know your highest education?",
                              "Has the recruiter been informed about your highest degree?"],
        "other skills": ["Does the recruiter know about your other skills?",
                         "Has the recruiter been told about your other skills?"],
        "availability": ["Does the recruiter know your availability?",
                         "Has the recruiter been informed about when you could start?"],
    },
    requirements=(
        _req("highest education", ["PhD in Linguistics"], "bachelor",
             ["Bachelor of Arts in History", "Bachelor of Fine Arts"], "a linguistics PhD follows an arts bachelor"),
        _req("highest education", ["Master of Public Health"], "bachelor",
             ["Bachelor of Science in Biology", "Bachelor in Economics"],
             "a public-health master follows a science or economics bachelor"),
        _req("highest education", ["Master in Data Science"], "bachelor",
             ["Bachelor of Science in Biology", "Bachelor in Mechanical Engineering", "Bachelor in Economics"],
             "a data-science master follows a quantitative bachelor"),
        _req("industry experience", ["two years as a nurse"], "bachelor", ["Bachelor of Science in Biology"],
             "nursing follows a science bachelor"),
    ),
)

DOMAINS: dict[str, Domain] = {TRAVEL.name: TRAVEL, JOB.name: JOB}
N_INSTANCES = 10
DEFAULT_SEED = 2026

PROMPT = """You are {role}. These are the facts you know:

{facts}

The {questioner} will ask you questions; each question starts with "{tag}:".
Reply to each with one short sentence that starts with "{answer}" and gives only what was asked.
Now and then I will ask you a private question that starts with "{me}"; the {questioner} never sees it.
Reply to it with "{aside}" followed by yes or no.
Never write anything after your reply, not even on a new line."""


@dataclass(frozen=True)
class Instance:
    """One game instance, with clembench's game_instance fields.

    `probes` maps each probing round to {slot: question index}, in the order the slots are probed.
    """

    game_id: int
    experiment: str
    tag: str
    slots: dict[str, str]
    request_order: list[str]
    requests: dict[str, int]
    probes: dict[int, dict[str, int]]
    initial_prompt: str
    lang: str = "en"
    extra: dict[str, Any] = field(default_factory=dict)

    def question(self, slot: str) -> str:
        """The questioner's request for a slot (pxp's text for a known domain, else a generic one)."""
        domain = DOMAINS.get(self.experiment)
        if domain is not None and slot in domain.requests:
            texts = domain.requests[slot]
            return texts[self.requests.get(slot, 0) % len(texts)]
        return f"What is your {slot}?"

    def probe_question(self, probe_round: int, slot: str) -> str:
        """The probing question for a slot in a round."""
        domain = DOMAINS.get(self.experiment)
        if domain is not None and slot in domain.probe_questions:
            texts = domain.probe_questions[slot]
            return texts[self.probes[probe_round][slot] % len(texts)]
        return f"Has the questioner been informed about your {slot}?"

    def to_dict(self) -> dict[str, Any]:
        """clembench's game_instance dict (probe rounds as string keys, as JSON stores them)."""
        return {
            "game_id": self.game_id,
            "tag": self.tag,
            "slots": dict(self.slots),
            "initial_prompt": self.initial_prompt,
            "request_order": list(self.request_order),
            "requests": dict(self.requests),
            "probes": {str(r): dict(p) for r, p in self.probes.items()},
            "lang": self.lang,
            **self.extra,
        }


def facts_text(domain: Domain, slots: Mapping[str, str]) -> str:
    """clembench's instance string: `WHAT: ...` then `SLOT: value` per slot."""
    lines = [f"WHAT: {domain.what}"] + [f"{slot.upper()}: {value}" for slot, value in slots.items()]
    return "\n".join(lines)


def initial_prompt(domain: Domain, slots: Mapping[str, str]) -> str:
    return PROMPT.format(role=domain.role, facts=facts_text(domain, slots), questioner=domain.questioner,
                         tag=domain.tag, answer=rules.ANSWER_TAG, aside=rules.ASIDE_TAG, me=rules.ME_TAG)


def check_domain(domain: Domain) -> list[tuple[str, str]]:
    """Value pairs of different slots where one contains the other (must be empty)."""
    return rules.overlapping_values((slot, v) for slot, values in domain.values.items() for v in values)


#: draws of one instance's values before a domain's rules are called unsatisfiable
MAX_DRAWS = 10_000


def _coherent(dom: Domain, rng: random.Random) -> dict[str, str]:
    """One value per slot, drawn until the domain's rules hold (rejection sampling, seeded)."""
    for _ in range(MAX_DRAWS):
        slots = {slot: rng.choice(list(values)) for slot, values in dom.values.items()}
        if not dom.incoherent(slots):
            return slots
    raise InstanceError(f"{dom.name}: no coherent instance in {MAX_DRAWS:,} draws; check its requirements")


def generate(domain: str, *, seed: int = DEFAULT_SEED, n: int = N_INSTANCES) -> list[Instance]:
    """n instances of one domain, deterministic from the seed."""
    if domain not in DOMAINS:
        raise InstanceError(f"unknown domain {domain!r}; known: {', '.join(DOMAINS)}")
    dom = DOMAINS[domain]
    rng = random.Random(f"pxp-scorekeeping:{domain}:{seed}")
    out = []
    for game_id in range(n):
        slots = _coherent(dom, rng)
        bad = rules.overlapping_values(slots.items())
        if bad:  # cannot happen with checked value lists; kept as the guarantee
            raise InstanceError(f"{domain}: slot values overlap: {bad}")
        order = rng.sample(list(slots), len(slots))
        requests = {slot: rng.randrange(len(dom.requests[slot])) for slot in slots}
        probes: dict[int, dict[str, int]] = {}
        for r in range(len(slots) + 1):
            probing_order = rng.sample(list(slots), len(slots))
            probes[r] = {slot: rng.randrange(len(dom.probe_questions[slot])) for slot in probing_order}
        out.append(Instance(game_id=game_id, experiment=domain, tag=dom.tag, slots=slots,
                            request_order=order, requests=requests, probes=probes,
                            initial_prompt=initial_prompt(dom, slots)))
    return out


def generate_experiments(*, seed: int = DEFAULT_SEED, n: int = N_INSTANCES,
                         domains: Sequence[str] = tuple(DOMAINS)) -> dict[str, Any]:
    """clembench's instances.json structure for the given domains."""
    experiments = []
    for name in domains:
        experiments.append({"name": name, "game_instances": [i.to_dict() for i in generate(name, seed=seed, n=n)]})
    return {"experiments": experiments}


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise InstanceError(f"{where}.{key}: missing")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InstanceError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value


def parse_instance(data: Mapping[str, Any], experiment: str, where: str = "game_instance") -> Instance:
    """One clembench game_instance dict, validated; the error names the field."""
    if not isinstance(data, Mapping):
        raise InstanceError(f"{where}: expected an object")
    game_id = _need(data, "game_id", int, where)
    slots = dict(_need(data, "slots", dict, where))
    for slot, value in slots.items():
        if not isinstance(value, str) or not value.strip():
            raise InstanceError(f"{where}.slots.{slot}: expected a non-empty string")
        try:
            slots[slot] = clean_name(value, f"{where}.slots.{slot}")
        except TextRefused as exc:
            raise InstanceError(str(exc)) from None
    order = _need(data, "request_order", list, where)
    if sorted(order) != sorted(slots):
        raise InstanceError(f"{where}.request_order: must list each slot once, got {order}")
    requests = data.get("requests", {}) or {}
    if not isinstance(requests, dict) or not all(isinstance(v, int) for v in requests.values()):
        raise InstanceError(f"{where}.requests: expected {{slot: int}}")
    raw_probes = _need(data, "probes", dict, where)
    probes: dict[int, dict[str, int]] = {}
    for r in range(len(slots) + 1):
        rp = raw_probes.get(str(r), raw_probes.get(r))
        if not isinstance(rp, dict) or sorted(rp) != sorted(slots):
            raise InstanceError(f"{where}.probes.{r}: must map each slot to a question index")
        if not all(isinstance(v, int) for v in rp.values()):
            raise InstanceError(f"{where}.probes.{r}: question indices must be integers")
        probes[r] = dict(rp)
    bad = rules.overlapping_values(slots.items())
    if bad:
        raise InstanceError(f"{where}.slots: value {bad[0][0]!r} is contained in {bad[0][1]!r}")
    tag = _need(data, "tag", str, where)
    prompt = _need(data, "initial_prompt", str, where)
    lang = data.get("lang", "en")
    known = {"game_id", "slots", "request_order", "requests", "probes", "tag", "initial_prompt", "lang"}
    extra = {k: v for k, v in data.items() if k not in known}
    return Instance(game_id=game_id, experiment=experiment, tag=tag, slots=dict(slots), request_order=list(order),
                    requests=dict(requests), probes=probes, initial_prompt=prompt,
                    lang=lang if isinstance(lang, str) else "en", extra=extra)


def parse_instances(data: Mapping[str, Any]) -> list[Instance]:
    """All instances of a loaded clembench instances.json (experiments → game_instances)."""
    if not isinstance(data, Mapping):
        raise InstanceError("instances: expected an object with 'experiments'")
    experiments = _need(data, "experiments", list, "instances")
    out = []
    for i, exp in enumerate(experiments):
        where = f"experiments[{i}]"
        if not isinstance(exp, Mapping):
            raise InstanceError(f"{where}: expected an object")
        name = _need(exp, "name", str, where)
        games = _need(exp, "game_instances", list, where)
        seen: dict[int, int] = {}
        for j, game in enumerate(games):
            inst = parse_instance(game, name, f"{where}.game_instances[{j}]")
            if inst.game_id in seen:
                raise InstanceError(f"{where}.game_instances[{j}].game_id: {inst.game_id} is also "
                                    f"game_instances[{seen[inst.game_id]}]'s; each game_id once per experiment")
            seen[inst.game_id] = j
            out.append(inst)
    return out
