"""MATCH and offline AGREE shared by the tasks (DESIGN §1, MATCH / AGREE).

MATCH compares predictions: normalised label equality (RAD, labels), equality of the
sets of canonical RDKit SMILES (DRUG), normalised text equality (free text). The
offline AGREE is a lexical similarity with a threshold.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from pxp.data.match import EXACT_MATCH_KINDS as EXACT_MATCH_KINDS  # MATCH lives below the tasks
from pxp.data.match import TASK_MATCH_KIND as TASK_MATCH_KIND
from pxp.data.match import MatchFn as MatchFn
from pxp.data.match import TaskError as TaskError
from pxp.data.match import content_match as content_match
from pxp.data.match import fold_case as _fold
from pxp.data.match import match_for as match_for
from pxp.data.match import match_label as match_label
from pxp.data.match import match_smiles as match_smiles
from pxp.data.match import match_text as match_text
from pxp.data.match import normalise_label as normalise_label
from pxp.data.match import task_match_kind as task_match_kind

DEFAULT_AGREE_THRESHOLD = 0.5


# words of any script; Chinese and Japanese are written without spaces, so each of their
# characters is a word of its own (kana and hangul syllables likewise)
_IDEO = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD = re.compile(rf"[{_IDEO}]|[^\W_{_IDEO}]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "with",
        "which",
        "there",
        "these",
        "those",
    ]
)


def _bag(text: str) -> Counter[str]:
    return Counter(w for w in _WORD.findall(_fold(text)) if w not in _STOP)


def lexical_similarity(e1: str, e2: str) -> float:
    """Cosine similarity of the two explanations' word counts (stop words removed)."""
    a, b = _bag(e1), _bag(e2)
    if not a or not b:
        return 1.0 if not a and not b else 0.0
    dot = sum(c * b[w] for w, c in a.items())
    na = math.sqrt(sum(c * c for c in a.values()))
    nb = math.sqrt(sum(c * c for c in b.values()))
    return dot / (na * nb)


def lexical_agree(e1: str, e2: str, threshold: float = DEFAULT_AGREE_THRESHOLD) -> bool:
    """Offline AGREE: lexical similarity at or above the threshold."""
    return lexical_similarity(e1, e2) >= threshold


