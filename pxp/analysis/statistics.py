"""Two models on the same instances (docs/research.md, Grids and comparisons): paired differences of intelligibility.

For two experiments whose sessions cover the same instances, each (repetition, instance) present
in both is a pair of sessions. For the one-way (human, machine) and two-way properties
(Definition 1 of the papers; an aborted session is never intelligible) this gives:

- the two proportions and their difference A − B;
- a bootstrap 95 % confidence interval of the difference (percentile method, seeded), resampling
  instances with all their pairs (a cluster bootstrap: the repetitions of one instance are not
  independent; with one repetition it is the ordinary paired bootstrap, Efron & Tibshirani 1993);
- McNemar's test of the discordant pairs (McNemar 1947): the exact two-sided binomial p-value
  (`binomial_p`, exact in integers up to `EXACT_UP_TO` pairs) and the continuity-corrected chi-square statistic.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from pxp.analysis.queries import Selection, cached
from pxp.analysis.tables import session_frame
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.intelligibility import METRIC_LABELS
from pxp.storage.store import db_session, find_experiment
from pxp.storage.tables import Experiment

COMPARED: tuple[str, ...] = ("one_way_human", "one_way_machine", "two_way")
RESAMPLES = 10_000
#: bootstrap resamples drawn at once: 10,000 × 2,000 clusters in one matrix took 0.9 s and 480 MB, in chunks 0.1 s
CHUNK = 500
#: discordant pairs up to which McNemar's p is summed in whole numbers (about 50 ms at the limit), beyond in logarithms
EXACT_UP_TO = 10_000


class ComparisonError(PxpError, ValueError):
    """Two experiments that cannot be compared pair by pair (unknown, or no common instance)."""


@dataclass(frozen=True)
class Paired:
    """One property compared over `pairs` paired sessions of experiments A and B."""

    metric: str
    pairs: int
    a: float
    b: float
    difference: float
    ci_low: float
    ci_high: float
    #: discordant pairs: true for A only, true for B only
    a_only: int
    b_only: int
    mcnemar_chi2: float | None
    p_value: float


def mcnemar(a_only: int, b_only: int) -> tuple[float | None, float]:
    """McNemar's test: (continuity-corrected chi-square or None without discordant pairs, exact p)."""
    n = a_only + b_only
    if n == 0:
        return None, 1.0
    stat = (abs(a_only - b_only) - 1) ** 2 / n
    return float(stat), binomial_p(a_only, n)


def binomial_p(k: int, n: int) -> float:
    """The exact two-sided binomial p-value of k successes in n trials at probability 1/2: the probability of an
    outcome no likelier than k, 2·P(X ≤ min(k, n − k)) at most 1 (the distribution is symmetric)."""
    m = min(k, n - k)
    if 2 * m == n:
        return 1.0
    if n <= EXACT_UP_TO:
        term, tail = 1, 1  # C(n, 0); C(n, i + 1) = C(n, i)·(n − i)/(i + 1), exact in integers
        for i in range(m):
            term = term * (n - i) // (i + 1)
            tail += term
        return min(1.0, (2 * tail) / (1 << n))
    top = math.lgamma(n + 1) - n * math.log(2)
    logs = [top - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(m + 1)]
    peak = max(logs)
    return min(1.0, 2 * math.exp(peak) * math.fsum(math.exp(x - peak) for x in logs))


def bootstrap_ci(
    diffs: Sequence[float], clusters: Sequence[Hashable] | None = None, *, resamples: int = RESAMPLES,
    seed: int = 0, level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `diffs`, resampling whole clusters (default: each pair)."""
    return bootstrap_cis([diffs], clusters, resamples=resamples, seed=seed, level=level)[0]


def bootstrap_cis(
    diffs: Sequence[Sequence[float]], clusters: Sequence[Hashable] | None = None, *, resamples: int = RESAMPLES,
    seed: int = 0, level: float = 0.95,
) -> list[tuple[float, float]]:
    """`bootstrap_ci` of several properties of the same pairs: each its own interval from the same seeded draws
    of clusters (so each equals its `bootstrap_ci`), drawn once for all of them."""
    ds = [np.asarray(d, dtype=float) for d in diffs]
    if not ds or ds[0].size == 0:
        raise ComparisonError("no pairs to bootstrap")
    keys = pd.factorize(pd.Series(list(clusters)))[0] if clusters is not None else np.arange(ds[0].size)
    sums = [np.bincount(keys, weights=d) for d in ds]
    counts = np.bincount(keys).astype(float)
    rng = np.random.default_rng(seed)
    means = np.empty((len(ds), resamples))
    for start in range(0, resamples, CHUNK):  # the same draws as one (resamples × clusters) matrix, in cache
        rows = min(CHUNK, resamples - start)
        picks = rng.integers(0, counts.size, size=(rows, counts.size))
        drawn = counts[picks].sum(axis=1)
        for i, s in enumerate(sums):
            means[i, start:start + rows] = s[picks].sum(axis=1) / drawn
    tail = (1 - level) / 2 * 100
    out = []
    for m in means:
        lo, hi = np.percentile(m, [tail, 100 - tail])
        out.append((float(lo), float(hi)))
    return out


def paired(
    metric: str, a: Sequence[bool], b: Sequence[bool], clusters: Sequence[Hashable] | None = None, *,
    resamples: int = RESAMPLES, seed: int = 0, ci: tuple[float, float] | None = None,
) -> Paired:
    """Compare property `metric` of paired sessions: a[i] and b[i] are the same instance under A and B (`ci`: its
    bootstrap interval, when drawn already with other properties' by `bootstrap_cis`)."""
    if len(a) != len(b):
        raise ComparisonError("the two lists of paired sessions differ in length")
    if not a:
        raise ComparisonError("no paired sessions")
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    diffs = x.astype(float) - y.astype(float)
    lo, hi = ci or bootstrap_ci(diffs.tolist(), clusters, resamples=resamples, seed=seed)
    a_only, b_only = int((x & ~y).sum()), int((~x & y).sum())
    stat, p = mcnemar(a_only, b_only)
    return Paired(metric, int(x.size), float(x.mean()), float(y.mean()), float(diffs.mean()), lo, hi,
                  a_only, b_only, stat, p)


def pair_sessions(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Sessions of A and B on the same (repetition, instance): one row each, flags suffixed _a and _b."""
    keys = ["repetition", "instance"]
    cols = [*keys, *COMPARED]
    left = a[cols].drop_duplicates(keys)
    right = b[cols].drop_duplicates(keys)
    return left.merge(right, on=keys, suffixes=("_a", "_b")).sort_values(keys).reset_index(drop=True)


def compare_experiments(
    engine: Engine, first: str, second: str, *, resamples: int = RESAMPLES, seed: int = 0,
) -> dict[str, Any]:
    """The paired comparison of two experiments (names or ids) as JSON-ready data, cached by data version
    (pxp.analysis.queries.cached: the bootstrap is the slow part of the Analytics page's Compare view)."""
    return copy.deepcopy(cached(engine, "compare_experiments", (first, second, resamples, seed),
                                lambda: _compare(engine, first, second, resamples, seed)))


def setup(exp: Experiment) -> dict[str, str]:
    """What Compare names when two experiments differ: dataset, split, n, k, machine, checker, repetitions, seed,
    LEARN (as text; "—" where the experiment does not say, e.g. imported transcripts)."""
    c = exp.config or {}
    machine = str(c.get("machine") or "—")
    sim = c.get("simulated") if machine == "simulated" else None
    if sim:
        machine += " (" + ", ".join(f"{k} {v:g}" for k, v in sorted(sim.items())) + ")"
    split = c.get("split") or ("all" if c.get("dataset") else None)

    def text(v: Any) -> str:
        return "—" if v is None else ("on" if v is True else "off" if v is False else str(v))

    return {"dataset": text(c.get("dataset")), "split": text(split), "n": text(exp.n), "k": text(exp.k),
            "machine": machine, "checker": text(c.get("checker")), "repetitions": text(c.get("reps")),
            "seed": text(c.get("seed")), "LEARN": text(c.get("learn"))}


def differences(a: Experiment, b: Experiment) -> list[str]:
    """Each setting two experiments differ in, as "split train vs all" (empty: the same setup)."""
    sa, sb = setup(a), setup(b)
    return [f"{k} {sa[k]} vs {sb[k]}" for k in sa if sa[k] != sb[k]]


def difference_line(cmp: dict[str, Any]) -> str:
    """One line: every difference between A and B, and how many of their sessions were paired."""
    diff = cmp.get("differences") or []
    what = (f"A and B differ in {'; '.join(diff)}" if diff else
            "A and B have the same dataset, split, n, k, machine, checker, repetitions, seed and LEARN")
    if "pairs" not in cmp:
        return what + "."
    s = cmp["sessions"]
    return (f"{what}. Paired {cmp['pairs']} sessions (same repetition and instance, {cmp['instances']} instances) "
            f"of A's {s[cmp['a']]} and B's {s[cmp['b']]}.")


def _experiment(engine: Engine, name: str) -> Experiment:
    with db_session(engine) as db:
        exp = find_experiment(db, name_or_id=name)
    if exp is None or exp.id is None:
        raise ComparisonError(f"no experiment named {name!r}")
    return exp


def _compare(engine: Engine, first: str, second: str, resamples: int, seed: int) -> dict[str, Any]:
    exps = [_experiment(engine, name) for name in (first, second)]
    names = [e.name for e in exps]
    frames = [session_frame(engine, Selection(experiments=(e.id or 0,))) for e in exps]
    diff = differences(exps[0], exps[1])
    pairs = pair_sessions(frames[0], frames[1])
    if pairs.empty:
        raise ComparisonError(
            f"experiments {names[0]!r} and {names[1]!r} have no finished session on the same instance "
            "and repetition to pair: no paired test"
            + (f" (they differ in {'; '.join(diff)})" if diff else "")
        )
    clusters = pairs["instance"].tolist()
    cis = bootstrap_cis([pairs[f"{m}_a"].astype(float) - pairs[f"{m}_b"].astype(float) for m in COMPARED], clusters,
                        resamples=resamples, seed=seed)
    rows = [paired(m, pairs[f"{m}_a"].tolist(), pairs[f"{m}_b"].tolist(), clusters, resamples=resamples,
                   seed=seed, ci=ci) for m, ci in zip(COMPARED, cis, strict=True)]
    return {
        "a": names[0], "b": names[1], "pairs": len(pairs), "instances": int(pairs["instance"].nunique()),
        "differences": diff, "sessions": {names[0]: len(frames[0]), names[1]: len(frames[1])},
        "unpaired": {names[0]: len(frames[0]) - len(pairs), names[1]: len(frames[1]) - len(pairs)},
        "bootstrap": {"resamples": resamples, "seed": seed, "level": 0.95, "resampled": "instances"},
        "metrics": [asdict(r) | {"label": METRIC_LABELS[r.metric]} for r in rows],
    }


#: the comparison as a tidy CSV (docs/research.md, Grids and comparisons): one row per property, the numbers of the
#: JSON at full precision, units in the header
COMPARISON_CSV = ("a", "b", "property", "label", "pairs (sessions)", "a (proportion)", "b (proportion)",
                  "a - b (proportion)", "ci low (proportion)", "ci high (proportion)", "a only (sessions)",
                  "b only (sessions)", "mcnemar chi2", "mcnemar p")


def comparison_csv(cmp: dict[str, Any]) -> str:
    """The comparison's CSV: what `pxp report --compare --format json` holds per property, one value per cell."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COMPARISON_CSV)
    for m in cmp["metrics"]:
        w.writerow([cmp["a"], cmp["b"], m["metric"], m["label"], m["pairs"], m["a"], m["b"], m["difference"],
                    m["ci_low"], m["ci_high"], m["a_only"], m["b_only"],
                    "" if m["mcnemar_chi2"] is None else m["mcnemar_chi2"], m["p_value"]])
    return buf.getvalue()


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def comparison_lines(cmp: dict[str, Any]) -> list[str]:
    """The comparison as a text table (`pxp report --compare`)."""
    head = ("Property", cmp["a"], cmp["b"], "A − B [95% CI]", "A only", "B only", "McNemar p")
    body = [
        (m["label"], f"{m['a']:.3f}", f"{m['b']:.3f}",
         f"{m['difference']:+.3f} [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}]", str(m["a_only"]), str(m["b_only"]),
         _p(m["p_value"]))
        for m in cmp["metrics"]
    ]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    b = cmp["bootstrap"]
    return [
        f"A = {cmp['a']}, B = {cmp['b']}. {difference_line(cmp)}",
        line(head), *(line(r) for r in body),
        f"Bootstrap: {b['resamples']} resamples of instances, seed {b['seed']}, percentile interval. McNemar: "
        "exact binomial p on the discordant pairs.",
    ]
