"""The seeded simulated answerer drives every score path offline."""

from __future__ import annotations

import pytest

from pxp.protocols.scorekeeping.episode import play_episode
from pxp.protocols.scorekeeping.instances import generate
from pxp.protocols.scorekeeping.scores import leaderboard, score_interactions
from pxp.protocols.scorekeeping.simulated import SimulatedAnswerer


def _scores(agent: SimulatedAnswerer, n: int = 10) -> list[dict[str, object]]:
    out = []
    for domain in ("travel-booking", "job-interview"):
        for inst in generate(domain, seed=5, n=n):
            out.append(score_interactions(play_episode(inst, agent).to_interactions())["episode scores"])
    return out


def test_perfect_agent_scores_100() -> None:
    assert all(ep["Main Score"] == 100.0 and ep["Success"] == 1 for ep in _scores(SimulatedAnswerer(seed=1)))


def test_deterministic_from_seed() -> None:
    agent = SimulatedAnswerer(seed=3, probe_accuracy=0.7, slot_accuracy=0.6, format_error_rate=0.03)
    inst = generate("travel-booking", seed=1, n=1)[0]
    a = play_episode(inst, agent).to_interactions()
    b = play_episode(inst, SimulatedAnswerer(seed=3, probe_accuracy=0.7, slot_accuracy=0.6,
                                             format_error_rate=0.03)).to_interactions()
    c = play_episode(inst, SimulatedAnswerer(seed=4, probe_accuracy=0.7, slot_accuracy=0.6,
                                             format_error_rate=0.03)).to_interactions()
    assert a == b
    assert a != c


def test_rates_reach_every_score_path() -> None:
    eps = _scores(SimulatedAnswerer(seed=2, probe_accuracy=0.8, slot_accuracy=0.7, format_error_rate=0.04), n=10)
    assert any(ep["Aborted"] == 1 for ep in eps)
    played = [ep for ep in eps if ep["Aborted"] == 0]
    assert played
    assert any(ep["Slot-Filling-Accuracy"] < 1 for ep in played)  # type: ignore[operator]
    assert any(ep["Accuracy"] < 1 for ep in played)  # type: ignore[operator]
    assert any(ep["Violated Request Count"] > 0 for ep in eps)  # type: ignore[operator]
    board = leaderboard(("sim", ep) for ep in eps)["sim"]
    assert 0 < board["% Played"] < 100  # type: ignore[operator]


def test_wrong_probes_at_zero_accuracy() -> None:
    eps = _scores(SimulatedAnswerer(seed=1, probe_accuracy=0.0), n=2)
    assert all(ep["Accuracy"] == 0.0 and ep["Kappa"] == -1.0 for ep in eps)


def test_rates_are_checked() -> None:
    with pytest.raises(ValueError, match="probe_accuracy"):
        SimulatedAnswerer(probe_accuracy=1.5)


def test_wrong_values_are_still_shared() -> None:
    # slot_accuracy 0: no slot is filled, yet each asked slot is shared, so a perfect prober stays right
    eps = _scores(SimulatedAnswerer(seed=1, slot_accuracy=0.0), n=2)
    assert all(ep["Slot-Filling-Accuracy"] == 0.0 and ep["Accuracy"] == 1.0 for ep in eps)
    assert all(ep["Main Score"] == 0.0 for ep in eps)
