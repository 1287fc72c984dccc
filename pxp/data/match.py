"""MATCH over two predictions (DESIGN §1, MATCH / AGREE): normalised label equality (RAD,
labels), equality of the sets of canonical RDKit SMILES (DRUG), normalised text equality (free
text). Pure functions over text and RDKit, below the tasks that use them, so the importers can
compute the facts a transcript's content decides.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

from pxp.data.chem import InvalidSmiles, smiles_set
from pxp.protocols.errors import PxpError
from pxp.protocols.text import TextRefused, identity, skeleton

#: the study's five findings: the RAD label set when a dataset names none
STUDY_LABELS = ("Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax")


class TaskError(PxpError, ValueError):
    """A task setting pxp cannot use (e.g. an unknown MATCH kind); one line."""


def normalise_label(label: str) -> str:
    """Case, accents, punctuation and spacing folded: 'Pleural  effusion.' == 'pleural effusion'."""
    text = re.sub(r"[\W_]+", " ", fold_case(label))
    return " ".join(text.split())


def fold_case(text: str) -> str:
    """Case-folded, accents dropped as combining marks (not by an ASCII encode, which would
    erase every letter outside Latin: any two Chinese or Greek labels would be equal)."""
    if text.isascii():
        return text.lower()
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def label_identity(label: str) -> str:
    """What two labels are compared by as identities: the skeleton of the normalised label (docs/development.md
    "The text rule"), so a look-alike of a label is that label."""
    return skeleton(normalise_label(label))


def look_alike_labels(labels: Sequence[str]) -> tuple[str, str] | None:
    """The first two labels of a set that are one identity without being one label, or None."""
    seen: dict[str, str] = {}
    for x in labels:
        other = seen.setdefault(label_identity(x), x)
        if normalise_label(other) != normalise_label(x):
            return other, x
    return None


def label_set(given: Sequence[str] | None, where: str) -> dict[str, str]:
    """A label task's set, {normalised label: label}: `given` (--labels) under the text rule, else the study's five.

    Checked whole, like a task config's labels (pxp.tasks.custom): an empty set, an empty label, two labels equal
    once normalised (case, accents, punctuation, spacing, Unicode form), or two that look alike (their confusable
    skeletons, docs/development.md "The text rule") are refused, never collapsed; a label mixing scripts is refused."""
    if given is not None and not any(x.strip() for x in given):
        raise TaskError(f"{where}: --labels names no label; give the set comma-separated, e.g. "
                        "--labels Atelectasis,Pneumonia")
    out: dict[str, str] = {}
    for x in STUDY_LABELS if given is None else given:
        label = identity(x.strip(), f"{where}: --labels").text
        if not label:
            raise TaskError(f"{where}: --labels has an empty label (two commas together, or one at an end)")
        key = normalise_label(label)
        if key in out:
            raise TaskError(f"{where}: --labels names {out[key]!r} and {label!r}, the same label once case, "
                            "accents, punctuation and spacing are folded; give each once")
        out[key] = label
    alike = look_alike_labels(list(out.values()))
    if alike is not None:
        raise TextRefused(f"{where}: --labels: {alike[1]!r} looks the same as {alike[0]!r}; give each label once")
    return out


def label_in(allowed: dict[str, str], label: str, where: str, hint: str = "") -> str | TextRefused:
    """The set's own spelling of `label` (or of the label it looks the same as), or the one line (an
    error to report) naming the set."""
    known = allowed.get(normalise_label(label))
    if known is None:
        key = label_identity(label)
        known = next((x for x in allowed.values() if label_identity(x) == key), None)
    if known is not None:
        return known
    return TextRefused(f"{where}: label {label!r} is not one of the task's labels ({', '.join(allowed.values())})"
                       f"{hint}")


def match_label(y1: str, y2: str) -> bool:
    """RAD MATCH: equality of normalised labels (not substring containment)."""
    return normalise_label(y1) == normalise_label(y2)


def match_smiles(y1: str, y2: str) -> bool:
    """DRUG MATCH: the two reactant sets are equal as canonical SMILES sets."""
    return smiles_set(y1) == smiles_set(y2)


def match_text(y1: str, y2: str) -> bool:
    """Free-text MATCH: normalised equality."""
    return normalise_label(y1) == normalise_label(y2)


MatchFn = Callable[[str, str], bool]
_MATCH: dict[str, MatchFn] = {"label": match_label, "smiles": match_smiles, "text": match_text}


def match_for(kind: str) -> MatchFn:
    """The MATCH function of a kind: label, smiles or text."""
    try:
        return _MATCH[kind]
    except KeyError:
        raise TaskError(f"unknown MATCH kind {kind!r} (label, smiles or text)") from None


#: The MATCH kind of each built-in task.
TASK_MATCH_KIND: dict[str, str] = {"rad": "label", "drug": "smiles"}


def task_match_kind(task: str, config: dict[str, object] | None = None) -> str:
    """The MATCH kind for a task name (a custom task's config may name its own)."""
    if config and isinstance(config.get("match"), str):
        return str(config["match"])
    return TASK_MATCH_KIND.get(task, "text")


#: MATCH kinds whose answer the content decides exactly (DESIGN §1): RAD labels, DRUG SMILES sets
EXACT_MATCH_KINDS = frozenset({"label", "smiles"})


def content_match(kind: str) -> Callable[[str, str], bool | None] | None:
    """The task's MATCH for facts computed from content (pxp.protocols.pxp.facts), or None when
    the kind is not exact; the function gives None when a prediction is empty or does not parse."""
    if kind not in EXACT_MATCH_KINDS:
        return None
    fn = match_for(kind)

    def match(y1: str, y2: str) -> bool | None:
        if not y1.strip() or not y2.strip():
            return None
        try:
            return fn(y1, y2)
        except InvalidSmiles:
            return None

    return match
