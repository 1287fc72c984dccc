"""SQLModel tables of the scorekeeping game (docs/research.md, Scorekeeping game): games, episodes with JSON columns,
their calls.

An episode is one row holding what clembench's interactions.json holds (`interactions`, probes and turns
included) and its scores; the leaderboard reads only the scalar columns `aborted` and `main_score` plus
the small `scores` JSON, so scoring 10,000 stored episodes is one indexed select. Probes and turns stay
inside the episode's JSON: they are written once, read whole, and never queried on their own.
Every change here needs an Alembic migration in pxp/storage/migrations/versions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Text, UniqueConstraint
from sqlmodel import Field

from pxp.storage.tables import CallCost, Row, utcnow


class SkGame(Row, table=True):
    """A named set of scorekeeping episodes: one run of an answerer, or an imported clembench folder.

    `source` is run or clembench; `answerer` the spec (simulated, provider:model) of a run; `config`
    the run's settings and its instances (clembench game_instance dicts), so a re-run resumes alike.
    """

    __tablename__ = "sk_game"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    source: str = Field(default="run", max_length=16)
    answerer: str = Field(default="", max_length=300)
    seed: int = 0
    status: str = Field(default="created", max_length=16)
    note: str | None = Field(default=None, sa_type=Text)
    config: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)


class SkEpisode(Row, table=True):
    """One finished episode, stored whole: `<model>/<experiment>/episode_<k>` of its game.

    `interactions` is the interactions.json dict; `scores` the episode scores and `turn_scores` the
    per-round scores (clembench names, NaN stored as null); `instance` the game_instance it played.
    """

    __tablename__ = "sk_episode"
    __table_args__ = (
        # also the index of a game's episodes (game_id is its leading column)
        UniqueConstraint("game_id", "model", "experiment", "episode", name="uq_sk_episode_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    game_id: int = Field(foreign_key="sk_game.id")
    model: str = Field(max_length=300)
    experiment: str = Field(max_length=200)
    episode: int = 0
    aborted: bool = False
    main_score: float | None = None
    scores: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    turn_scores: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    interactions: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    instance: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)


class SkCall(CallCost, table=True):
    """One answerer call of a scorekeeping run (purpose answer or probe; attempt = the probe's try).

    Linked by game and episode key rather than to an episode row: a call is stored even when its
    episode never finishes (an API failure, a crash), so the accounting stays complete.
    """

    __tablename__ = "sk_call"

    id: int | None = Field(default=None, primary_key=True)
    game_id: int = Field(foreign_key="sk_game.id", index=True)
    episode_key: str = Field(max_length=600)
    created_at: datetime = Field(default_factory=utcnow)


class SkPlay(Row, table=True):
    """A half-played episode of a person playing the answerer in the app (docs/research.md, Scorekeeping game).

    Only the replies are kept: the game master is deterministic given the replies, so replaying them
    rebuilds the episode (pxp.running.scorekeeping.play). `step` counts the replies, so a reply sent
    from a stale browser tab is refused. The row goes once the episode is finished and stored.
    """

    __tablename__ = "sk_play"
    __table_args__ = (UniqueConstraint("game_id", "model", name="uq_sk_play_model"),)

    id: int | None = Field(default=None, primary_key=True)
    game_id: int = Field(foreign_key="sk_game.id")
    model: str = Field(max_length=300)
    experiment: str = Field(max_length=200)
    episode: int = 0
    step: int = 0
    replies: list[str] = Field(default_factory=list, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


SK_TABLES = (SkGame, SkEpisode, SkCall, SkPlay)
