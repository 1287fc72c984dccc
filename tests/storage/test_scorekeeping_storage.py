"""Scorekeeping tables on SQLite and PostgreSQL: an episode stored whole once, NaN scores as null, the
0004 migration down and up again."""

from __future__ import annotations

from alembic import command
from sqlalchemy import Engine, inspect, select

from pxp.protocols.scorekeeping.episode import play_episode
from pxp.protocols.scorekeeping.instances import generate
from pxp.running.scorekeeping.games import create_game, episode_values, store_episode, stored_keys
from pxp.storage.scorekeeping import SkCall, SkEpisode
from pxp.storage.store import alembic_config, upgrade


def _call(game_id: int) -> dict[str, object]:
    return {"game_id": game_id, "episode_key": "m/travel-booking/episode_0", "provider": "simulated",
            "model": "simulated", "purpose": "probe", "attempt": 1}


def test_an_episode_is_stored_once_with_its_calls(any_engine: Engine) -> None:
    game = create_game(any_engine, "g", source="run", answerer="simulated")
    assert game.id is not None and create_game(any_engine, "g", source="run").id == game.id
    inst = generate("travel-booking", n=1)[0]
    aborted = play_episode(inst, ["no tag at all"] * 5, model="m")  # 5 invalid probe replies: aborted
    values = episode_values(game.id, ("m", "travel-booking", 0), aborted, instance=inst)
    assert store_episode(any_engine, values, [_call(game.id)]) is True
    assert store_episode(any_engine, {**values}, [_call(game.id)]) is False  # the key is stored already
    assert stored_keys(any_engine, game.id) == {("m", "travel-booking", 0)}
    with any_engine.connect() as c:
        row = c.execute(select(SkEpisode.__table__)).mappings().one()  # type: ignore[attr-defined]
        n_calls = len(c.execute(select(SkCall.__table__)).all())  # type: ignore[attr-defined]
    assert n_calls == 2  # both calls were made, both are accounted
    assert row["aborted"] is True and row["main_score"] is None
    assert row["scores"]["Main Score"] is None and row["scores"]["Aborted"] == 1  # NaN stored as null
    assert row["interactions"]["Aborted"] is True and row["instance"]["slots"] == inst.slots


def test_migration_0004_down_and_up(any_engine: Engine) -> None:
    cfg = alembic_config(any_engine)
    with any_engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0004")  # 0005 (sk_play) down
        assert "sk_play" not in set(inspect(conn).get_table_names())
        command.downgrade(cfg, "-1")  # 0004 down
    assert not {"sk_game", "sk_episode", "sk_call"} & set(inspect(any_engine).get_table_names())
    upgrade(any_engine)
    assert {"sk_game", "sk_episode", "sk_call", "sk_play"} <= set(inspect(any_engine).get_table_names())
