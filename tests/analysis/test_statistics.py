"""Paired comparison of two experiments (docs/research.md, Grids and comparisons): numbers checked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sqlalchemy import Engine

from pxp.analysis.statistics import (
    EXACT_UP_TO,
    ComparisonError,
    binomial_p,
    bootstrap_ci,
    compare_experiments,
    comparison_lines,
    mcnemar,
    paired,
)
from pxp.data.importers.transcripts import import_transcripts

# (sender, tag) sequences with n = 4, k = 3
BOTH = [("machine", "INIT"), ("human", "RATIFY"), ("machine", "RATIFY")]  # two-way
HUMAN_ONLY = [("machine", "INIT"), ("human", "RATIFY"), ("machine", "REFUTE"), ("human", "RATIFY")]
NEITHER = [("machine", "INIT"), ("human", "REFUTE"), ("machine", "REFUTE"), ("human", "REJECT")]


def test_mcnemar_by_hand() -> None:
    # 5 discordant pairs all one way: exact p = 2 × 0.5^5; chi-square (|5 − 0| − 1)² / 5
    stat, p = mcnemar(5, 0)
    assert stat == pytest.approx(16 / 5) and p == pytest.approx(0.0625)
    assert mcnemar(3, 3)[1] == pytest.approx(1.0)
    assert mcnemar(0, 0) == (None, 1.0)


def test_binomial_p_is_scipys_exact_test() -> None:
    """Whole numbers up to EXACT_UP_TO discordant pairs, logarithms beyond: both give scipy's binomtest."""
    from scipy.stats import binomtest

    cases = [(k, n) for n in (1, 2, 3, 7, 10, 25, 60, 200, 1001) for k in {0, 1, n // 3, n // 2, n - 1, n}]
    cases += [(k, n) for n in (EXACT_UP_TO, EXACT_UP_TO + 1, 30_001) for k in (n // 2 - 200, n // 2 - 10, n // 2)]
    for k, n in cases:
        assert binomial_p(k, n) == pytest.approx(binomtest(k, n, 0.5).pvalue, rel=1e-9, abs=1e-300), (k, n)
    assert binomial_p(4_000, 10_000) < 1e-80 and binomial_p(5_000, 10_001) == pytest.approx(1.0)


def test_paired_proportions_by_hand() -> None:
    a = [True] * 6 + [False] * 4
    b = [True] * 3 + [False] * 7
    r = paired("two_way", a, b)
    assert (r.pairs, r.a, r.b, r.a_only, r.b_only) == (10, 0.6, 0.3, 3, 0) and r.difference == pytest.approx(0.3)
    assert r.p_value == pytest.approx(0.25) and r.mcnemar_chi2 == pytest.approx(4 / 3)
    assert r.ci_low <= r.difference <= r.ci_high
    with pytest.raises(ComparisonError):
        paired("two_way", [True], [True, False])


def test_bootstrap_interval_by_hand() -> None:
    # no spread: the interval is the point; two clusters with mean 0.5 each: always 0.5
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert bootstrap_ci([1, 0, 1, 0], ["x", "x", "y", "y"]) == (0.5, 0.5)
    # 1,000 pairs, 300 differ by 1: mean 0.3, standard error sqrt(0.3 × 0.7 / 1000) = 0.0145;
    # the percentile interval is close to 0.3 ± 1.96 × 0.0145
    diffs = [1.0] * 300 + [0.0] * 700
    lo, hi = bootstrap_ci(diffs, seed=7)
    se = math.sqrt(0.3 * 0.7 / 1000)
    assert lo == pytest.approx(0.3 - 1.96 * se, abs=0.004) and hi == pytest.approx(0.3 + 1.96 * se, abs=0.004)
    assert bootstrap_ci(diffs, seed=7) == (lo, hi)  # seeded: the same interval again
    assert bootstrap_ci(diffs, seed=8) != (lo, hi)


def _import(engine: Engine, tmp: Path, name: str, sessions: dict[str, list[tuple[str, str]]]) -> None:
    path = tmp / f"{name}.jsonl"
    with path.open("w") as f:
        for inst, msgs in sessions.items():
            for j, (sender, tag) in enumerate(msgs, start=1):
                f.write(json.dumps({"session": inst, "instance": inst, "j": j, "sender": sender, "tag": tag,
                                    "prediction": "p", "explanation": "e"}) + "\n")
    import_transcripts(engine, path, name=name, n=4, k=3)


def test_two_experiments_compared_pair_by_pair(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, "A", {"i1": BOTH, "i2": BOTH, "i3": BOTH, "i4": BOTH, "i5": NEITHER, "i6": NEITHER,
                                    "i7": BOTH})
    _import(engine, tmp_path, "B", {"i1": BOTH, "i2": HUMAN_ONLY, "i3": HUMAN_ONLY, "i4": HUMAN_ONLY,
                                    "i5": NEITHER, "i6": NEITHER})
    cmp = compare_experiments(engine, "A", "B", resamples=2000, seed=1)
    assert (cmp["pairs"], cmp["instances"], cmp["unpaired"]) == (6, 6, {"A": 1, "B": 0})  # i7 has no partner
    m = {r["metric"]: r for r in cmp["metrics"]}
    # one-way for the human: i1–i4 under both → 4/6 each, no discordant pair
    h = m["one_way_human"]
    assert (h["a"], h["b"], h["difference"], h["a_only"], h["b_only"], h["p_value"]) == (
        pytest.approx(4 / 6), pytest.approx(4 / 6), 0.0, 0, 0, 1.0)
    assert (h["ci_low"], h["ci_high"]) == (0.0, 0.0)
    # one-way for the machine and two-way: A 4/6, B 1/6; i2–i4 discordant for A → p = 2 × 0.5³
    for name in ("one_way_machine", "two_way"):
        r = m[name]
        assert (r["a"], r["b"], r["difference"], r["a_only"], r["b_only"]) == (
            pytest.approx(4 / 6), pytest.approx(1 / 6), pytest.approx(0.5), 3, 0)
        assert r["p_value"] == pytest.approx(0.25) and r["mcnemar_chi2"] == pytest.approx(4 / 3)
        # a bootstrap sample draws 6 instances; the difference is (discordant drawn) / 6 ∈ [0, 1]
        assert 0.0 <= r["ci_low"] < 0.5 < r["ci_high"] <= 1.0
    text = "\n".join(comparison_lines(cmp))
    assert "2-way intelligible sessions" in text and "+0.500" in text and "0.250" in text
    with pytest.raises(ComparisonError, match="no experiment named 'C'"):
        compare_experiments(engine, "A", "C")


def test_the_bootstrap_in_chunks_draws_what_one_matrix_draws() -> None:
    """Resamples are drawn CHUNK rows at a time (memory): the interval is the one of all rows drawn at once."""
    import numpy as np

    from pxp.analysis.statistics import CHUNK

    diffs = np.random.default_rng(5).integers(-1, 2, size=300).astype(float)
    resamples = 2 * CHUNK + 37
    picks = np.random.default_rng(3).integers(0, diffs.size, size=(resamples, diffs.size))
    lo, hi = np.percentile(diffs[picks].mean(axis=1), [2.5, 97.5])
    assert bootstrap_ci(diffs.tolist(), resamples=resamples, seed=3) == (float(lo), float(hi))


def test_compare_names_every_difference_and_refuses_when_nothing_pairs(engine: Engine) -> None:
    """Two runs on the train split and on every instance, with 1 and 2 repetitions: the line names split and
    repetitions and how many sessions paired; a run on another dataset pairs nothing and is refused."""
    from pxp.running.pxp.config import RunConfig
    from pxp.running.pxp.controlled.runner import run_experiment
    from pxp.running.pxp.experiments import create_experiment
    from tests.factories import make_rad

    make_rad(engine, per_label=2)
    make_rad(engine, name="other-rad", per_label=1)
    for cfg, name in ((RunConfig(dataset="toy-rad", split="train", n=4), "tr"),
                      (RunConfig(dataset="toy-rad", reps=2, n=4), "all2"),
                      (RunConfig(dataset="other-rad", split="train", n=4), "other")):
        run_experiment(engine, create_experiment(engine, cfg, name=name).id or 0)
    cmp = compare_experiments(engine, "tr", "all2", resamples=200)
    assert cmp["differences"] == ["split train vs all", "repetitions 1 vs 2"]
    total = cmp["sessions"]
    assert (total["tr"], total["all2"]) == (3, 20)  # 3 of the 10 instances are train; all 10, twice
    assert cmp["pairs"] == total["tr"]
    line = comparison_lines(cmp)[0]
    assert ("differ in split train vs all; repetitions 1 vs 2" in line
            and f"Paired {cmp['pairs']} sessions" in line and f"of A's {total['tr']} and B's {total['all2']}" in line)
    same = compare_experiments(engine, "tr", "tr", resamples=200)
    assert same["differences"] == [] and "have the same dataset, split, n, k, machine" in comparison_lines(same)[0]
    with pytest.raises(ComparisonError, match=r"no paired test \(they differ in dataset toy-rad vs other-rad\)"):
        compare_experiments(engine, "tr", "other")


def test_intervals_drawn_together_are_each_propertys_own() -> None:
    """bootstrap_cis draws the clusters once for several properties; each interval equals bootstrap_ci's alone."""
    import random

    from pxp.analysis.statistics import bootstrap_ci, bootstrap_cis

    rng = random.Random(3)
    clusters = [f"case-{rng.randint(0, 40)}" for _ in range(300)]
    diffs = [[float(rng.choice([-1, 0, 0, 1])) for _ in clusters] for _ in range(3)]
    together = bootstrap_cis(diffs, clusters, resamples=1_200, seed=5)
    assert together == [bootstrap_ci(d, clusters, resamples=1_200, seed=5) for d in diffs]
    assert len(set(together)) == 3  # three properties, three intervals
