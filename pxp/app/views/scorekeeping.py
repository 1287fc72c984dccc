"""Scorekeeping: the leaderboard of stored games (error bars), probe accuracy per probing round (the private →
shared transition of the paper), an episode viewer with the dialogue and the probes apart, and "play as the
answerer" (pxp.app.scorekeeping.play), where a person sets a human baseline (docs/research.md, Scorekeeping game).

Render functions only; every number comes from pxp.analysis.scorekeeping, the code path of
`pxp scorekeeping report`. Model names, replies and questions are untrusted: shown as text or in tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pxp.analysis import figures
from pxp.analysis.scorekeeping import build, probe_accuracy_by_round
from pxp.app import resources, ui
from pxp.app.scorekeeping import TABS
from pxp.app.scorekeeping import play as sk_play
from pxp.protocols.scorekeeping.episode import dialogue_from_turns
from pxp.protocols.scorekeeping.scores import PLAYED, QUALITY, QUALITY_STD
from pxp.running.scorekeeping.games import list_games, stored_episode, stored_scores
from pxp.running.scorekeeping.play import HUMAN_GAME


def _figure(v: Any, fmt: str) -> str:
    return "—" if v is None or v != v else fmt.format(v)


def leaderboard(rep: dict[str, Any]) -> None:
    models = rep["models"]
    rows = [{"model": m, "episodes": rep["counts"].get(m, 0), PLAYED: v[PLAYED], QUALITY: v[QUALITY],
             QUALITY_STD: v[QUALITY_STD]} for m, v in models.items()]
    df = pd.DataFrame(rows).sort_values(QUALITY, ascending=False, na_position="last")
    # a missing figure (one episode has no standard deviation) reads "—", never "None"
    shown = df.assign(**{c: [_figure(v, f) for v in df[c]] for c, f in ((PLAYED, "{:.1f}"), (QUALITY, "{:.2f}"),
                                                                        (QUALITY_STD, "{:.2f}"))})
    st.dataframe(shown, hide_index=True, column_config={
        c: st.column_config.TextColumn(alignment="right") for c in (PLAYED, QUALITY, QUALITY_STD)})
    st.vega_lite_chart(figures.leaderboard(df), key="sk_leaderboard")
    st.caption("Quality Score: mean Main Score of the played episodes, error bar ± one standard deviation; "
               "% Played: episodes not aborted.")


def probe_curve(curves: dict[str, dict[int, tuple[float, int]]]) -> None:
    st.vega_lite_chart(figures.probe_curve(curves), key="sk_probe_curve")
    ui.chart_table("Probe accuracy per round", pd.DataFrame(
        [{"model": m, "round": r, "probe accuracy": a, "episodes": n} for m, by in curves.items()
         for r, (a, n) in by.items()]), "sk_probe_curve_table")


def episode_viewer(game: str, keys: list[str]) -> None:
    key = st.selectbox("Episode", keys, key="sk_episode")
    if key is None:
        return
    ep = stored_episode(resources.engine(), game, key)
    scores = {k: v for k, v in ep["scores"].items()}
    st.dataframe(pd.DataFrame([scores]), hide_index=True)
    left, right = st.columns(2)
    with left:
        st.subheader("Dialogue")
        person = str(ep.get("model", "")).startswith("human:")  # a person's episode: a person's avatar
        for m in dialogue_from_turns(ep["interactions"].get("turns", [])):
            mine = m["role"] != "user"
            with st.chat_message("assistant" if mine else "user",
                                 avatar=(":material/person:" if person else None) if mine else None):
                ui.show_text(m["content"])
    with right:
        st.subheader("Probes (private, outside the dialogue)")
        rows = [{"round": r, "slot": p.get("target"), "question": p.get("question"), "truth": p.get("gt"),
                 "reply": p.get("answer"), "value": p.get("value"), "tries": p.get("tries"),
                 "correct": None if p.get("value") is None else p.get("value") == p.get("gt")}
                for r, rnd in enumerate(ep["interactions"].get("probes", [])) for p in rnd]
        st.dataframe(pd.DataFrame(rows), hide_index=True)




def choose_games(engine: Engine) -> list[str] | None:
    """The games whose results are shown (None: there are no games yet)."""
    games = list_games(engine)
    if not games:
        st.info("No scorekeeping games yet. Run one with `pxp scorekeeping run --answerer simulated --name demo`, "
                "import clembench results with `pxp scorekeeping import-clembench DIR --name NAME`, "
                "or play one yourself under *Play as the answerer*.")
        return None
    names = [g["name"] for g in games]
    default = names[:3] + ([HUMAN_GAME] if HUMAN_GAME in names[3:] else [])
    return st.multiselect("Games", names, default=default, key="sk_games", placeholder="choose games")


def results(engine: Engine, chosen: list[str], tabs: Sequence[Any]) -> None:
    """The three result tabs of the chosen games."""
    if not chosen:
        tabs[0].caption("Choose at least one game.")
        return
    rows = stored_scores(engine, chosen, turns=True)
    if not rows:
        tabs[0].caption("These games hold no finished episodes yet.")
        return
    rep = build(rows)
    with tabs[0]:
        leaderboard(rep)
    with tabs[1]:
        probe_curve(probe_accuracy_by_round(rows))
        st.caption("The share of right probe replies in each probing round, over the rounds played.")
    with tabs[2]:
        game = st.selectbox("Game", chosen, key="sk_view_game")
        if game is not None:
            episode_viewer(game, [r.key for r in stored_scores(engine, [game])])


def render() -> None:
    st.title("Scorekeeping: private and shared")
    engine = resources.engine()
    chosen = choose_games(engine)
    # the open tab is kept in the URL (?sk_tab=...), so a reload returns to it
    tabs = st.tabs(TABS, key="sk_tab", on_change="rerun", bind="query-params")
    if chosen is not None:
        results(engine, chosen, tabs)
    if tabs[3].open:  # the play pane (and its keyboard shortcuts) only when its tab is open
        with tabs[3]:
            sk_play.render(engine)


render()
