"""The estimate in words (docs/research.md, Cost estimate): the table `pxp run --estimate` prints, and estimate beside
actual.

`estimate_lines` renders a pxp.running.pxp.controlled.estimate.Estimate; `versus_actual` sets a stored estimate
(Experiment.config["estimate"]) beside the run's LLMCall totals for `pxp calls` and `pxp report --calls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `pxp calls` sets an estimate beside the actual without the estimate's module and its ORM
    from pxp.running.pxp.controlled.estimate import Estimate


def _num(v: float | None, usd: bool = False) -> str:
    if v is None:
        return "unknown"
    return f"${v:,.2f}" if usd else f"{round(v):,}"


def estimate_lines(est: Estimate) -> list[str]:
    """The estimate as a text table: one line per kind of call (one repetition), totals, assumptions."""
    head = ("Per repetition", "calls", "tokens in", "tokens out", "US$")
    body = [(r.what, _num(r.calls), _num(r.tokens_in), _num(r.tokens_out), _num(r.usd, True)) for r in est.rows]
    per = est.as_json()["per_repetition"]
    body.append(("one repetition", _num(per["calls"]), _num(per["tokens_in"]), _num(per["tokens_out"]),
                 _num(per["usd"], True)))
    body.append((f"all {est.reps} repetition(s)", _num(est.calls), _num(est.tokens_in), _num(est.tokens_out),
                 _num(est.usd, True)))
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                              strict=True)))

    return ["Estimate (before the run)", line(head), *(line(r) for r in body), "Assumptions:",
            *(f"- {x}" for x in est.assumptions)]


def versus_actual(estimate_json: Mapping[str, Any], totals: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Estimate and actual side by side per LLMCall purpose and in total (`pxp calls`).

    `totals` are pxp.analysis.calls.call_totals rows (one per repetition, model and purpose).
    """
    est = dict(estimate_json.get("by_purpose") or {})
    actual: dict[str, dict[str, float]] = {}
    for r in totals:
        d = actual.setdefault(str(r["purpose"]), {"calls": 0, "tokens_in": 0, "tokens_out": 0})
        for key in d:
            d[key] += r[key]
    rows = []
    for purpose in sorted(set(est) | set(actual)):
        e, x = est.get(purpose, {}), actual.get(purpose, {})
        rows.append({"purpose": purpose, **{f"{k}_{w}": src.get(k, 0) for k in ("calls", "tokens_in", "tokens_out")
                                            for w, src in (("estimated", e), ("actual", x))}})
    costs = [float(r["cost_usd"]) for r in totals if r.get("cost_usd") is not None]
    rows.append({
        "purpose": "all",
        **{f"{k}_{w}": v for k in ("calls", "tokens_in", "tokens_out")
           for w, v in (("estimated", estimate_json.get(k, 0)), ("actual", sum(r[k] for r in totals)))},
        "usd_estimated": estimate_json.get("usd"), "usd_actual": round(sum(costs), 6) if costs else None,
    })
    return rows


def unknown_cost_reason(unpriced: Sequence[str]) -> str:
    """Why a run's cost is unknown, in one clause: the models pxp's price list (pxp.llm.pricing) does not name.

    An unknown cost is never taken for zero: the run asks for the same confirmation as one above the limit
    (docs/research.md, Controlled runs)."""
    from pxp.llm.pricing import CHECKED

    names = ", ".join(unpriced) or "a model"
    return (f"pxp has no price for {names} (its list prices of {CHECKED} name the hosted Anthropic and OpenAI "
            "models; a local server's or another provider's model has none)")
