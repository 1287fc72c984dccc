"""Runs of the scorekeeping game (docs/research.md, Scorekeeping game): many episodes at once, resumable, every call
accounted.

The answerer is `simulated` (pxp.protocols.scorekeeping.simulated, seeded) or any `provider:model`
(pxp.llm.registry), called through the SDK under the shared call limit (pxp.llm.limits). Episodes run
concurrently in a thread pool; each is played by clembench's game master (pxp.protocols.scorekeeping.
episode) and stored whole, in one transaction with its calls, once finished. A re-run of the same game
skips the stored episodes, so a crash or an API failure loses at most the episodes in flight.
LLM calls are stored as they are made (sk_call), so even those of an unfinished episode are counted;
a simulated answerer's calls are stored with their episode.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from pxp.llm.base import LLMError, Prompt, Provider, ProviderOptions, TextPart, Turn, is_llm_spec, parse_spec
from pxp.llm.limits import call_slot, set_call_limit
from pxp.llm.redact import redact
from pxp.llm.registry import make_provider
from pxp.protocols.errors import PxpError
from pxp.protocols.scorekeeping.episode import Answerer, Request, play_episode
from pxp.protocols.scorekeeping.instances import DEFAULT_SEED, DOMAINS, Instance, generate, parse_instance
from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer
from pxp.running.scorekeeping import games
from pxp.storage.scorekeeping import SkGame
from pxp.storage.tables import utcnow

SIMULATED = "simulated"
SYSTEM = "You are a player in a dialogue game. Follow the game's instructions exactly."
"""The system prompt of an LLM answerer (clembench sends none; the game's rules are the first user turn)."""
MAX_TOKENS = 200


class RunError(PxpError, ValueError):
    """A scorekeeping run that cannot start as asked; one line for the user."""


@dataclass(frozen=True)
class RunSettings:
    """What to run: the game's name, the answerer and its settings, and the instances (default: both
    domains generated from the seed). `latency_s` delays every simulated reply (benchmarks, demos)."""

    name: str
    answerer: str = SIMULATED
    seed: int = DEFAULT_SEED
    concurrency: int = 4
    instances: Sequence[Instance] | None = None
    probe_accuracy: float = 0.9
    slot_accuracy: float = 0.9
    format_error_rate: float = 0.02
    latency_s: float = 0.0
    temperature: float | None = None
    max_tokens: int = MAX_TOKENS

    def config(self, instances: Sequence[Instance]) -> dict[str, Any]:
        return {"probe_accuracy": self.probe_accuracy, "slot_accuracy": self.slot_accuracy,
                "format_error_rate": self.format_error_rate, "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "instances": [{"experiment": i.experiment, **i.to_dict()} for i in instances]}


@dataclass
class RunResult:
    game: str
    total: int
    stored: int = 0
    skipped: int = 0
    failed: str | None = None
    seconds: float = 0.0
    episode_seconds: list[float] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.failed is None and self.stored + self.skipped == self.total


def model_label(answerer: str) -> str:
    """The model name an answerer's episodes are stored under (clembench's `<model>` folder)."""
    if answerer == SIMULATED:
        return SIMULATED
    return parse_spec(answerer)[1]


def default_instances(seed: int) -> list[Instance]:
    return [i for d in DOMAINS for i in generate(d, seed=seed)]


def numbered(instances: Sequence[Instance]) -> list[tuple[str, int, Instance]]:
    """(experiment, k, instance): k counts the instances of each experiment from 0, as clembench does."""
    seen: dict[str, int] = {}
    out = []
    for inst in instances:
        k = seen.get(inst.experiment, 0)
        seen[inst.experiment] = k + 1
        out.append((inst.experiment, k, inst))
    return out


# --- answerers ---------------------------------------------------------------------------------

CallSink = Callable[[dict[str, Any]], None]


def _call_row(provider: str, model: str, req: Request, latency_ms: float, **cost: Any) -> dict[str, Any]:
    return {"provider": provider, "model": model, "purpose": req.kind, "attempt": req.attempt,
            "tokens_in": 0, "tokens_out": 0, "cache_read": 0, "cache_write": 0, "latency_ms": latency_ms,
            "cost_usd": None, "error": None, "created_at": utcnow(), **cost}


def simulated_answerer(settings: RunSettings, sink: CallSink) -> Answerer:
    """The seeded simulated agent, each reply accounted as a call (and delayed by `latency_s`)."""
    agent = SimulatedAnswerer(seed=settings.seed, probe_accuracy=settings.probe_accuracy,
                              slot_accuracy=settings.slot_accuracy, format_error_rate=settings.format_error_rate)

    def answer(req: Request) -> str:
        t0 = time.perf_counter()
        if settings.latency_s > 0:
            time.sleep(settings.latency_s)
        reply = agent(req)
        sink(_call_row(SIMULATED, SIMULATED, req, (time.perf_counter() - t0) * 1000))
        return reply

    return answer


def prompt_of(req: Request) -> Prompt:
    """The answerer's dialogue (plus the probe, for a probe) as a provider prompt; the dialogue's last
    message ends the cached prefix, which every probe of the round shares."""
    last = len(req.messages) - (2 if req.kind == "probe" else 1)
    turns = [Turn(role="user" if m["role"] == "user" else "assistant",
                  parts=[TextPart(m["content"], cache=i == last)]) for i, m in enumerate(req.messages)]
    return Prompt(system=SYSTEM, turns=turns)


def llm_answerer(settings: RunSettings, provider: Provider, sink: CallSink) -> Answerer:
    """A `provider:model` answerer; each call holds a shared call slot and is accounted, failed or not."""

    def answer(req: Request) -> str:
        t0 = time.perf_counter()
        try:
            with call_slot():
                c = provider.complete(prompt_of(req), max_tokens=settings.max_tokens,
                                      temperature=settings.temperature)
        except LLMError as e:
            sink(_call_row(provider.name, provider.model, req, (time.perf_counter() - t0) * 1000,
                           error=redact(str(e))))
            raise
        sink(_call_row(provider.name, provider.model, req, c.latency_ms, tokens_in=c.tokens_in,
                       tokens_out=c.tokens_out, cache_read=c.cache_read, cache_write=c.cache_write,
                       cost_usd=c.cost_usd))
        # clembench's backends strip the model's text
        return c.text.strip()

    return answer


# --- the run -------------------------------------------------------------------------------------

def _check(settings: RunSettings) -> None:
    if settings.answerer != SIMULATED and not is_llm_spec(settings.answerer):
        raise RunError(f"--answerer {settings.answerer!r}: use simulated or provider:model "
                       "(e.g. anthropic:claude-sonnet-4-6, openai:gpt-4.1)")
    if settings.concurrency < 1:
        raise RunError(f"--concurrency must be at least 1, not {settings.concurrency}")
    if not settings.name.strip():
        raise RunError("--name must not be empty")


def _game(engine: Engine, settings: RunSettings) -> tuple[SkGame, list[Instance]]:
    """The game to run (created, or the stored one to resume: its answerer and instances win)."""
    game = games.find_game(engine, settings.name)
    if game is None:
        instances = list(settings.instances) if settings.instances is not None else default_instances(settings.seed)
        if not instances:
            raise RunError("no instances to play")
        game = games.create_game(engine, settings.name, source="run", answerer=settings.answerer,
                                 seed=settings.seed, config=settings.config(instances))
    if game.source != "run" or game.answerer != settings.answerer:
        what = {"run": f"episodes of {game.answerer}", "clembench": "an imported clembench folder"}.get(
            game.source, f"{game.source} episodes")
        raise RunError(f"game {settings.name!r} holds {what}; use another --name")
    stored = game.config.get("instances", [])
    instances = [parse_instance({k: v for k, v in d.items() if k != "experiment"}, d["experiment"],
                                f"game {game.name!r} instance") for d in stored]
    if settings.instances is not None and [i.to_dict() for i in settings.instances] != [i.to_dict() for i in instances]:
        raise RunError(f"game {settings.name!r} was started on other instances; resume it without --instances "
                       "or use another --name")
    return game, instances


def run_game(engine: Engine, settings: RunSettings,
             on_episode: Callable[[str, bool], None] | None = None) -> RunResult:
    """Play every episode of the game not stored yet, `concurrency` at once; stop starting new ones at the
    first LLM failure (the game is then paused: re-run it to resume). Settings of a stored game win."""
    _check(settings)
    # the provider first: a missing key or an unknown provider stores nothing
    provider = None if settings.answerer == SIMULATED else make_provider(settings.answerer, ProviderOptions.from_env())
    game, instances = _game(engine, settings)
    assert game.id is not None
    gid = game.id
    label = model_label(game.answerer)
    done = games.stored_keys(engine, gid)
    todo = [(exp, k, inst) for exp, k, inst in numbered(instances) if (label, exp, k) not in done]
    result = RunResult(game.name, total=len(instances), skipped=len(instances) - len(todo))
    cfg = game.config
    settings = RunSettings(name=game.name, answerer=game.answerer, seed=game.seed,
                           concurrency=settings.concurrency, probe_accuracy=cfg.get("probe_accuracy", 0.9),
                           slot_accuracy=cfg.get("slot_accuracy", 0.9),
                           format_error_rate=cfg.get("format_error_rate", 0.02), latency_s=settings.latency_s,
                           temperature=cfg.get("temperature"), max_tokens=cfg.get("max_tokens", MAX_TOKENS))
    simulated = game.answerer == SIMULATED
    if not simulated:
        set_call_limit(settings.concurrency)
    stop = threading.Event()
    lock = threading.Lock()
    games.set_status(engine, gid, "running")
    t_run = time.perf_counter()

    def play(exp: str, k: int, inst: Instance) -> None:
        if stop.is_set():
            return
        key = games.episode_key(label, exp, k)
        buffered: list[dict[str, Any]] = []

        def sink(row: dict[str, Any]) -> None:
            row = {**row, "game_id": gid, "episode_key": key}
            if simulated:
                buffered.append(row)
            else:  # an LLM call is stored at once: it is paid for whether or not the episode finishes
                games.store_calls(engine, [row])

        answerer = simulated_answerer(settings, sink) if provider is None else llm_answerer(settings, provider, sink)
        t0 = time.perf_counter()
        try:
            record = play_episode(inst, answerer, model=label)
        except LLMError as e:
            games.store_calls(engine, buffered)
            with lock:
                if result.failed is None:
                    result.failed = str(e)
            stop.set()
            return
        new = games.store_episode(engine, games.episode_values(gid, (label, exp, k), record, instance=inst),
                                  buffered)
        with lock:
            result.episode_seconds.append(time.perf_counter() - t0)
            if new:
                result.stored += 1
            else:
                result.skipped += 1
        if on_episode is not None:
            on_episode(key, new)

    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="pxp-sk") as pool:
        try:
            for f in [pool.submit(play, *t) for t in todo]:
                f.result()
        except BaseException:  # Ctrl-C or a database failure: finish the episodes in flight, start no more
            stop.set()
            games.set_status(engine, gid, "paused", "interrupted; re-run to resume")
            raise
    result.seconds = time.perf_counter() - t_run
    if result.finished:
        games.set_status(engine, gid, "finished")
    else:
        games.set_status(engine, gid, "paused", result.failed)
    return result
