"""clembench result folders for the scorekeeping game: read them, and write pxp's episodes in their layout.

Layout (as clembench's GameRecorder/GameScorer store it):
`<root>/<model>/privateshared/<experiment>/episode_<k>/interactions.json` and `scores.json`.
Reading never stops at a bad episode: a malformed file, a missing field or an unknown tag in a reply
gives one line naming the file and the field, that episode is skipped and the others are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pxp.protocols.errors import PxpError
from pxp.protocols.scorekeeping.episode import EpisodeRecord, RecordError, from_interactions
from pxp.protocols.scorekeeping.instances import Instance
from pxp.protocols.scorekeeping.scores import score_interactions

GAME = "privateshared"
_EPISODE = re.compile(r"^episode_(\d+)$")


class ClembenchError(PxpError, ValueError):
    """A clembench results file pxp cannot read: file and field, one line."""


@dataclass
class ClembenchEpisode:
    """One episode read from (or to be written to) a clembench results folder; scores keep NaN."""

    model: str
    experiment: str
    episode: int
    record: EpisodeRecord
    scores: dict[str, Any]
    path: Path | None = None

    @property
    def key(self) -> str:
        return f"{self.model}/{self.experiment}/episode_{self.episode}"


@dataclass
class ReadResult:
    episodes: list[ClembenchEpisode] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _episode_dirs(root: Path) -> Iterable[tuple[str, str, int, Path]]:
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        game_dir = model_dir / GAME
        if not game_dir.is_dir():
            continue
        for exp_dir in sorted(p for p in game_dir.iterdir() if p.is_dir()):
            eps = []
            for ep_dir in exp_dir.iterdir():
                m = _EPISODE.match(ep_dir.name)
                if m and ep_dir.is_dir():
                    eps.append((int(m.group(1)), ep_dir))
            for k, ep_dir in sorted(eps):
                yield model_dir.name, exp_dir.name, k, ep_dir


def read_episode(path: Path) -> tuple[EpisodeRecord, dict[str, Any]]:
    """Read and score one interactions.json; raises ValueError with `<file>: <field>: <problem>`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClembenchError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClembenchError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ClembenchError(f"{path}: not UTF-8 text: {exc.reason}") from None
    try:
        record = from_interactions(data)
    except RecordError as exc:
        raise ClembenchError(f"{path}: {exc}") from None
    return record, score_interactions(record.to_interactions())


def read_results(root: Path | str) -> ReadResult:
    """Every scorekeeping episode under a clembench results folder, scored; bad ones as error lines."""
    root = Path(root)
    result = ReadResult()
    if not root.is_dir():
        result.errors.append(f"{root}: not a folder")
        return result
    for model, experiment, k, ep_dir in _episode_dirs(root):
        path = ep_dir / "interactions.json"
        if not path.is_file():
            result.errors.append(f"{path}: missing file")
            continue
        try:
            record, scores = read_episode(path)
        except ValueError as exc:
            result.errors.append(str(exc))
            continue
        result.episodes.append(ClembenchEpisode(model, experiment, k, record, scores, path))
    return result


def _stamped(turns: list[list[dict[str, Any]]], timestamp: str) -> list[list[dict[str, Any]]]:
    out = []
    for turn in turns:
        events = []
        for e in turn:
            ev = {"from": e.get("from"), "to": e.get("to"), "timestamp": e.get("timestamp", timestamp),
                  "action": e.get("action")}
            events.append(ev)
        out.append(events)
    return out


def _dump(path: Path, data: Any) -> None:
    # clembench stores with json.dump: NaN stays the NaN literal its own tools read back
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def write_episode(root: Path | str, model: str, experiment: str, k: int, record: EpisodeRecord, *,
                  instance: Instance | None = None, timestamp: str | None = None) -> Path:
    """Write one episode's interactions.json and scores.json (and instance.json if given); returns its folder."""
    ep_dir = Path(root) / model / GAME / experiment / f"episode_{k}"
    ep_dir.mkdir(parents=True, exist_ok=True)
    interactions = record.to_interactions()
    interactions["turns"] = _stamped(interactions["turns"], timestamp or datetime.now().isoformat())
    _dump(ep_dir / "interactions.json", interactions)
    _dump(ep_dir / "scores.json", score_interactions(record.to_interactions()))
    if instance is not None:
        _dump(ep_dir / "instance.json", instance.to_dict())
    return ep_dir


def write_results(root: Path | str, episodes: Iterable[ClembenchEpisode]) -> list[Path]:
    """Write several episodes in clembench's layout."""
    return [write_episode(root, e.model, e.experiment, e.episode, e.record) for e in episodes]
