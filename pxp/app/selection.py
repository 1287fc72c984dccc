"""The Analytics page's selection: kept in the URL's query parameters and across visits.

Pure functions over plain values, so the rule (URL, then the last choice, then the most
recent experiment that has finished sessions) is tested without a browser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def parse_ids(text: str | None) -> list[int]:
    """'3,5' -> [3, 5]; anything that is not a whole number is dropped."""
    out = []
    for part in (text or "").split(","):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
    return out


def format_ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def default_experiment(experiments: Sequence[Mapping[str, Any]]) -> int | None:
    """The most recent experiment with finished or aborted sessions (Table 1 counts them);
    the most recent one when none has any yet."""
    if not experiments:
        return None
    ended = [e for e in experiments if int(e.get("ended", 0) or 0) > 0]
    return int((ended or list(experiments))[-1]["id"])


def initial_experiments(
    experiments: Sequence[Mapping[str, Any]], url: str | None, kept: Sequence[int] | None,
) -> list[int]:
    """The experiments to select when the page opens: the URL's, else the last choice, else the default.

    Ids no longer in the database are dropped; an explicit empty choice (all experiments) is kept.
    """
    known = {int(e["id"]) for e in experiments}
    if url is not None:
        return [i for i in parse_ids(url) if i in known]
    if kept is not None:
        return [i for i in kept if i in known]
    d = default_experiment(experiments)
    return [] if d is None else [d]
