"""A person plays the answerer of the scorekeeping game in the app, one reply at a time (docs/research.md,
Scorekeeping game).

clembench's game master (pxp.protocols.scorekeeping.episode) calls its answerer and waits for the reply;
a person replies across page runs. The game master is deterministic given the replies, so only the
replies are kept (sk_play) and every page run replays them: the first request without a reply is the
one the person sees, exactly the prompt a model gets. When the replies finish the episode it is scored
and stored like any model's, under the model `human:<name>`, in the game `human-baseline` (the default
instances of `pxp scorekeeping run`, so people and models play the same episodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from pxp.protocols.errors import PxpError
from pxp.protocols.scorekeeping.aborts import abort_reason
from pxp.protocols.scorekeeping.episode import EpisodeRecord, Request, play_episode
from pxp.protocols.scorekeeping.instances import DEFAULT_SEED, Instance, parse_instance
from pxp.running.scorekeeping import games
from pxp.running.scorekeeping.runs import default_instances, numbered
from pxp.storage.scorekeeping import SkPlay
from pxp.storage.store import table_of
from pxp.storage.tables import utcnow

HUMAN_GAME = "human-baseline"
HUMAN_SOURCE = "human"
HUMAN_PREFIX = "human:"
MAX_NAME = 60

_P: Table = table_of(SkPlay)


class PlayError(PxpError, ValueError):
    """A play request the app cannot carry out (a bad name, a stale reply); one line for the user."""


class _NeedReply(PxpError, RuntimeError):
    """Raised by the replaying answerer when the stored replies run out: carries the pending request."""

    def __init__(self, request: Request) -> None:
        super().__init__(f"waiting for the reply to the {request.kind} on {request.slot!r}")
        self.request = request


def human_model(name: str) -> str:
    """The model name a person's episodes are stored under: `human:<name>`."""
    clean = " ".join(name.split())
    if not clean:
        raise PlayError("Enter your name first.")
    if len(clean) > MAX_NAME:
        raise PlayError(f"A name of at most {MAX_NAME} characters, please.")
    if "/" in clean:
        raise PlayError("A name without '/', please (it separates the parts of an episode's key).")
    return HUMAN_PREFIX + clean


def replay(instance: Instance, replies: Sequence[str], model: str) -> tuple[Request | None, EpisodeRecord | None]:
    """(the request awaiting a reply, None) while the episode runs; (None, record) once it is over."""
    it = iter(list(replies))

    def answer(request: Request) -> str:
        try:
            return next(it)
        except StopIteration:
            raise _NeedReply(request) from None

    try:
        record = play_episode(instance, answer, model=model)
    except _NeedReply as waiting:
        return waiting.request, None
    return None, record


@dataclass(frozen=True)
class Play:
    """A person's episode in progress: which one, the replies so far and the request now asked."""

    model: str
    experiment: str
    episode: int
    step: int
    replies: list[str]
    request: Request

    @property
    def key(self) -> str:
        return games.episode_key(self.model, self.experiment, self.episode)


@dataclass(frozen=True)
class Finished:
    """An episode the last reply finished: stored under `key` with these scores."""

    key: str
    scores: dict[str, Any]
    #: for an aborted episode, which rule which reply broke (pxp.protocols.scorekeeping.episode.abort_reason)
    why: str | None = None


def human_game(engine: Engine, *, create: bool = True) -> tuple[int | None, list[Instance]]:
    """The game of people's episodes and its instances; created on first use (id None if not yet and
    not `create`: the instances it will have)."""
    game = games.find_game(engine, HUMAN_GAME)
    if game is None:
        insts = default_instances(DEFAULT_SEED)
        if not create:
            return None, insts
        game = games.create_game(engine, HUMAN_GAME, source=HUMAN_SOURCE, answerer="human", seed=DEFAULT_SEED,
                                 config={"instances": [{"experiment": i.experiment, **i.to_dict()} for i in insts]})
    if game.source != HUMAN_SOURCE:
        raise PlayError(f"The game {HUMAN_GAME!r} holds episodes of {game.answerer or game.source}, "
                        "not people's; rename it to play here.")
    assert game.id is not None
    instances = [parse_instance({k: v for k, v in d.items() if k != "experiment"}, d["experiment"],
                                f"game {HUMAN_GAME!r} instance") for d in game.config.get("instances", [])]
    return game.id, instances


def _existing(engine: Engine) -> tuple[int, list[Instance]]:
    gid, instances = human_game(engine)
    assert gid is not None
    return gid, instances


def _instance(instances: Sequence[Instance], experiment: str, k: int) -> Instance:
    for exp, i, inst in numbered(instances):
        if (exp, i) == (experiment, k):
            return inst
    raise PlayError(f"episode {experiment}/episode_{k} is not in the game {HUMAN_GAME!r}")


def progress(engine: Engine, model: str) -> tuple[int, int]:
    """(episodes this person finished, episodes in the game)."""
    gid, instances = human_game(engine, create=False)
    done = 0 if gid is None else sum(1 for m, _, _ in games.stored_keys(engine, gid) if m == model)
    return done, len(instances)


def current(engine: Engine, model: str) -> Play | None:
    """The person's half-played episode, replayed up to the request awaiting a reply (None: none)."""
    gid, instances = human_game(engine, create=False)
    if gid is None:
        return None
    with engine.connect() as conn:
        row = conn.execute(select(_P).where(_P.c.game_id == gid, _P.c.model == model)).mappings().first()
    if row is None:
        return None
    inst = _instance(instances, row["experiment"], int(row["episode"]))
    replies = [str(r) for r in row["replies"]]
    request, _ = replay(inst, replies, model)
    if request is None:  # finished but not stored (a crash between the two): the next reply call stores it
        return None
    return Play(model, row["experiment"], int(row["episode"]), int(row["step"]), replies, request)


def start(engine: Engine, model: str) -> Play | None:
    """Begin the person's next unplayed episode (or return the one in progress); None when all are played."""
    play = current(engine, model)
    if play is not None:
        return play
    gid, instances = _existing(engine)
    _finish_leftover(engine, gid, instances, model)
    done = {(e, k) for m, e, k in games.stored_keys(engine, gid) if m == model}
    todo = [(exp, k) for exp, k, _ in numbered(instances) if (exp, k) not in done]
    if not todo:
        return None
    exp, k = todo[0]
    try:
        with engine.begin() as conn:
            conn.execute(insert(_P).values(game_id=gid, model=model, experiment=exp, episode=k, step=0, replies=[],
                                           created_at=utcnow(), updated_at=utcnow()))
    except IntegrityError:
        pass  # started in another tab at the same moment: play that one
    return current(engine, model)


def reply(engine: Engine, model: str, text: str, step: int) -> Play | Finished:
    """Add the person's reply to the request shown at `step`; store the episode if this reply ends it.

    The reply goes to the game master as typed (its tag rules apply as to any model). A reply sent for
    a step that is no longer current (another tab answered first) is refused with PlayError.
    """
    gid, instances = _existing(engine)
    with engine.begin() as conn:
        row = conn.execute(select(_P).where(_P.c.game_id == gid, _P.c.model == model)).mappings().first()
        if row is None or int(row["step"]) != step:
            raise PlayError("This episode moved on (in another tab?); here is where it stands now.")
        replies = [*(str(r) for r in row["replies"]), text]
        done = conn.execute(update(_P).where(_P.c.id == row["id"], _P.c.step == step)
                            .values(replies=replies, step=step + 1, updated_at=utcnow())).rowcount
        if done != 1:
            raise PlayError("This episode moved on (in another tab?); here is where it stands now.")
    finished = _finish_leftover(engine, gid, instances, model)
    if finished is not None:
        return finished
    play = current(engine, model)
    assert play is not None
    return play


def _finish_leftover(engine: Engine, gid: int, instances: Sequence[Instance], model: str) -> Finished | None:
    """Store the person's episode if its replies finish it, and drop its sk_play row."""
    with engine.connect() as conn:
        row = conn.execute(select(_P).where(_P.c.game_id == gid, _P.c.model == model)).mappings().first()
    if row is None:
        return None
    exp, k = row["experiment"], int(row["episode"])
    inst = _instance(instances, exp, k)
    _, record = replay(inst, [str(r) for r in row["replies"]], model)
    if record is None:
        return None
    values = games.episode_values(gid, (model, exp, k), record, instance=inst)
    games.store_episode(engine, values)
    with engine.begin() as conn:
        conn.execute(delete(_P).where(_P.c.id == row["id"]))
    return Finished(games.episode_key(model, exp, k), values["scores"], abort_reason(record))


def abandon(engine: Engine, model: str) -> None:
    """Drop the person's half-played episode without storing it (it may be started again)."""
    gid, _ = human_game(engine, create=False)
    if gid is None:
        return
    with engine.begin() as conn:
        conn.execute(delete(_P).where(_P.c.game_id == gid, _P.c.model == model))
