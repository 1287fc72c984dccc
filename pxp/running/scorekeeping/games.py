"""Stored scorekeeping games (docs/research.md, Scorekeeping game): create and find games, store finished episodes
whole,
import a clembench results folder, export a game in clembench's layout, read the stored scores.

An episode is written in one transaction with the calls it made, once finished; a key already
stored wins (a re-run or a re-import skips it), so runs resume and imports are idempotent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Insert, Table, func, insert, select
from sqlalchemy.exc import IntegrityError

from pxp.data.scorekeeping.clembench import ReadResult, iter_results, write_episode
from pxp.protocols.errors import PxpError
from pxp.protocols.scorekeeping.episode import EpisodeRecord, RecordError, from_interactions
from pxp.protocols.scorekeeping.instances import Instance, InstanceError, parse_instance
from pxp.protocols.scorekeeping.scores import MAIN_SCORE, nan_to_none, score_interactions
from pxp.storage.scorekeeping import SkCall, SkEpisode, SkGame
from pxp.storage.store import table_of
from pxp.storage.tables import utcnow

_G: Table = table_of(SkGame)
_E: Table = table_of(SkEpisode)
_C: Table = table_of(SkCall)

Key = tuple[str, str, int]
"""(model, experiment, episode k)."""


class GameError(PxpError, LookupError):
    """A game that does not exist, or cannot be used as asked; one line for the user."""


def episode_key(model: str, experiment: str, k: int) -> str:
    """clembench's path of an episode below the results root, without the game folder."""
    return f"{model}/{experiment}/episode_{k}"


def find_game(engine: Engine, name: str) -> SkGame | None:
    with engine.connect() as conn:
        row = conn.execute(select(_G).where(_G.c.name == name)).mappings().first()
    return SkGame(**row) if row is not None else None


def get_game(engine: Engine, name: str) -> SkGame:
    """The game called `name`, or GameError naming it."""
    game = find_game(engine, name)
    if game is None:
        raise GameError(f"no scorekeeping game named {name!r}")
    return game


def create_game(engine: Engine, name: str, *, source: str, answerer: str = "", seed: int = 0,
                config: dict[str, Any] | None = None) -> SkGame:
    """A new game; when another process created it first, that one is returned."""
    try:
        with engine.begin() as conn:
            conn.execute(_new_game(name, source=source, answerer=answerer, seed=seed, config=config))
    except IntegrityError:
        pass
    return get_game(engine, name)


def _new_game(name: str, *, source: str, answerer: str = "", seed: int = 0,
              config: dict[str, Any] | None = None) -> Insert:
    return insert(_G).values(name=name, source=source, answerer=answerer, seed=seed, status="created",
                             config=config or {}, created_at=utcnow())


def set_status(engine: Engine, game_id: int, status: str, note: str | None = None) -> None:
    with engine.begin() as conn:
        _set_status(conn, game_id, status, note)


def _set_status(conn: Connection, game_id: int, status: str, note: str | None = None) -> None:
    conn.execute(_G.update().where(_G.c.id == game_id).values(status=status, note=note))


def stored_keys(engine: Engine, game_id: int) -> set[Key]:
    with engine.connect() as conn:
        return _stored_keys(conn, game_id)


def _stored_keys(conn: Connection, game_id: int) -> set[Key]:
    rows = conn.execute(select(_E.c.model, _E.c.experiment, _E.c.episode).where(_E.c.game_id == game_id))
    return {(r.model, r.experiment, int(r.episode)) for r in rows}


def episode_values(game_id: int, key: Key, record: EpisodeRecord, *, instance: Instance | None = None,
                   scores: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sk_episode row of a finished episode, scored as clembench scores it (NaN stored as null)."""
    interactions = record.to_interactions()
    if scores is None:
        scores = score_interactions(interactions, len(instance.slots) if instance is not None else None)
    episode = nan_to_none(scores["episode scores"])
    turns = nan_to_none({str(t): s for t, s in scores["turn scores"].items()})
    model, experiment, k = key
    return {"game_id": game_id, "model": model, "experiment": experiment, "episode": k,
            "aborted": bool(record.aborted), "main_score": episode.get(MAIN_SCORE), "scores": episode,
            "turn_scores": turns, "interactions": interactions,
            "instance": instance.to_dict() if instance is not None else None, "created_at": utcnow()}


def store_episode(engine: Engine, values: dict[str, Any], calls: Sequence[dict[str, Any]] = ()) -> bool:
    """Insert one finished episode with its calls in one transaction; False if the key was stored already
    (then only the calls are stored: they were made and are accounted)."""
    try:
        with engine.begin() as conn:
            conn.execute(insert(_E).values(**values))
            if calls:
                conn.execute(insert(_C), list(calls))
        return True
    except IntegrityError:
        store_calls(engine, calls)
        return False


def store_calls(engine: Engine, calls: Sequence[dict[str, Any]]) -> None:
    if calls:
        with engine.begin() as conn:
            conn.execute(insert(_C), list(calls))


@dataclass
class ImportResult:
    game: str
    stored: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _instance_beside(path: Path | None, experiment: str) -> Instance | None:
    """The instance.json clembench writes beside interactions.json, when it is there and valid."""
    if path is None or not (path.parent / "instance.json").is_file():
        return None
    try:
        return parse_instance(json.loads((path.parent / "instance.json").read_text(encoding="utf-8")), experiment)
    except (OSError, ValueError, InstanceError):
        return None


#: episodes inserted at a time by an import
EPISODE_BATCH = 100


class _Refused(Exception):
    """Some episodes were refused and --keep-good was not given: the import's transaction rolls back."""


def import_clembench(engine: Engine, root: Path | str, name: str, *, keep_good: bool = False) -> ImportResult:
    """Read, validate and score every episode of a clembench results folder into game `name`.

    All or nothing, like every importer: a bad episode gives one error line (file and field) and
    nothing is stored, unless `keep_good`, when the good episodes are stored. One pass and one
    transaction: episodes are read one at a time and inserted in batches, so memory does not grow
    with the folder; episodes already in the game are skipped.
    """
    try:
        return _import_once(engine, root, name, keep_good)
    except IntegrityError:  # another import made the game or stored an episode meanwhile: read again
        try:
            return _import_once(engine, root, name, keep_good)
        except IntegrityError:
            raise GameError(f"another import into game {name!r} ran at the same time; run this one again once it "
                            "has finished") from None


def _import_once(engine: Engine, root: Path | str, name: str, keep_good: bool) -> ImportResult:
    read = ReadResult()
    result = ImportResult(name, errors=read.errors, warnings=read.warnings)
    try:
        with engine.begin() as conn:
            game = _game_for_import(conn, name, root)
            have = _stored_keys(conn, game)
            rows: list[dict[str, Any]] = []
            for ep in iter_results(root, read):
                key = (ep.model, ep.experiment, ep.episode)
                if key in have:
                    result.skipped += 1
                    continue
                have.add(key)
                rows.append(episode_values(game, key, ep.record, instance=_instance_beside(ep.path, ep.experiment),
                                           scores=ep.scores))
                result.stored += 1
                if len(rows) >= EPISODE_BATCH:
                    conn.execute(insert(_E), rows)
                    rows = []
            if rows:
                conn.execute(insert(_E), rows)
            if (read.errors and not keep_good) or not (result.stored or result.skipped):
                raise _Refused
            _set_status(conn, game, "finished")
    except _Refused:
        result.stored = result.skipped = 0  # nothing was kept
    return result


def _game_for_import(conn: Connection, name: str, root: Path | str) -> int:
    """The id of game `name`, made in the import's transaction if new; GameError if it is not a
    clembench import."""
    row = conn.execute(select(_G.c.id, _G.c.source, _G.c.answerer).where(_G.c.name == name)).first()
    if row is None:
        new = _new_game(name, source="clembench", config={"folder": str(Path(root).resolve())})
        return int(conn.execute(new.returning(_G.c.id)).scalar_one())
    if row.source != "clembench":
        raise GameError(f"game {name!r} holds a {row.source} of {row.answerer}; import into another --name")
    return int(row.id)


def export_game(engine: Engine, name: str, out: Path | str) -> list[Path]:
    """Write every episode of a game as clembench does (interactions.json, scores.json, instance.json)."""
    game = get_game(engine, name)
    written = []
    with engine.connect() as conn:
        rows = conn.execute(select(_E.c.model, _E.c.experiment, _E.c.episode, _E.c.interactions, _E.c.instance)
                            .where(_E.c.game_id == game.id).order_by(_E.c.model, _E.c.experiment, _E.c.episode))
        for r in rows:
            try:
                record = from_interactions(r.interactions)
                inst = parse_instance(r.instance, r.experiment) if r.instance else None
            except (RecordError, InstanceError) as e:
                raise GameError(f"stored episode {episode_key(r.model, r.experiment, r.episode)}: {e}") from None
            written.append(write_episode(out, r.model, r.experiment, int(r.episode), record, instance=inst))
    return written


@dataclass(frozen=True)
class StoredScores:
    """The stored scores of one episode (what the report and the leaderboard read)."""

    model: str
    experiment: str
    episode: int
    scores: dict[str, Any]
    turn_scores: dict[str, Any]

    @property
    def key(self) -> str:
        return episode_key(self.model, self.experiment, self.episode)


def stored_scores(engine: Engine, names: Iterable[str], *, turns: bool = False) -> list[StoredScores]:
    """The episode scores of the named games (turn scores too when asked), by model, experiment, k."""
    out: list[StoredScores] = []
    for name in names:
        game = get_game(engine, name)
        cols = [_E.c.model, _E.c.experiment, _E.c.episode, _E.c.scores] + ([_E.c.turn_scores] if turns else [])
        with engine.connect() as conn:
            rows = conn.execute(select(*cols).where(_E.c.game_id == game.id)
                                .order_by(_E.c.model, _E.c.experiment, _E.c.episode))
            out.extend(StoredScores(r.model, r.experiment, int(r.episode), dict(r.scores),
                                    dict(r.turn_scores) if turns else {}) for r in rows)
    return out


def stored_episode(engine: Engine, name: str, key: str) -> dict[str, Any]:
    """One stored episode of a game by its key `<model>/<experiment>/episode_<k>` (interactions, scores)."""
    game = get_game(engine, name)
    model, _, rest = key.rpartition("/episode_")
    model, _, experiment = model.rpartition("/")
    if not rest.isdigit() or not model:
        raise GameError(f"{key!r} is not <model>/<experiment>/episode_<k>")
    with engine.connect() as conn:
        row = conn.execute(select(_E).where(_E.c.game_id == game.id, _E.c.model == model, _E.c.experiment == experiment,
                                            _E.c.episode == int(rest))).mappings().first()
    if row is None:
        raise GameError(f"game {name!r} has no episode {key}")
    return dict(row)


def call_totals(engine: Engine, name: str) -> dict[str, Any]:
    """Calls, tokens, cost and errors of a game's answerer calls."""
    game = get_game(engine, name)
    with engine.connect() as conn:
        r = conn.execute(select(func.count(), func.coalesce(func.sum(_C.c.tokens_in), 0),
                                func.coalesce(func.sum(_C.c.tokens_out), 0), func.sum(_C.c.cost_usd),
                                func.count(_C.c.error)).where(_C.c.game_id == game.id)).one()
    return {"calls": int(r[0]), "tokens_in": int(r[1]), "tokens_out": int(r[2]),
            "cost_usd": float(r[3]) if r[3] is not None else None, "errors": int(r[4])}


def list_games(engine: Engine) -> list[dict[str, Any]]:
    """Every game with its episode count, newest first."""
    n = select(func.count()).where(_E.c.game_id == _G.c.id).scalar_subquery()
    with engine.connect() as conn:
        rows = conn.execute(select(_G.c.name, _G.c.source, _G.c.answerer, _G.c.status, _G.c.created_at,
                                   n.label("episodes")).order_by(_G.c.id.desc())).mappings().all()
    return [dict(r) for r in rows]
