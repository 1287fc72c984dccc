"""clembench result folders for the scorekeeping game: read them, and write pxp's episodes in their layout.

Layout (as clembench's GameRecorder/GameScorer store it):
`<root>/<model>/privateshared/<experiment>/episode_<k>/interactions.json` and `scores.json`.
Reading never stops at a bad episode: a malformed file, a missing field or an unknown tag in a reply
gives one line naming the file and the field, that episode is skipped and the others are read.
The root may be one model-pair folder (`<pair>/privateshared/...`), a version folder of
clembench/clembench-runs (`v1.0/<pair>/privateshared/...`), or the runs root itself
(`<version>/<pair>/privateshared/...`; the model is then `<version>/<pair>`). Every published layout
v0.9 ... v2.0 has the same interactions.json keys; a scores.json beside it is compared with pxp's
re-scoring and a difference is one warning line (the episode is kept, scored by pxp).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pxp.protocols.errors import PxpError
from pxp.protocols.scorekeeping.episode import EpisodeRecord, RecordError, from_interactions
from pxp.protocols.scorekeeping.instances import Instance
from pxp.protocols.scorekeeping.scores import score_interactions
from pxp.protocols.text import strip_bom

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
    published: dict[str, Any] | None = None
    """The scores.json found beside interactions.json (clembench's own scoring), if any."""

    @property
    def key(self) -> str:
        return f"{self.model}/{self.experiment}/episode_{self.episode}"


@dataclass
class ReadResult:
    episodes: list[ClembenchEpisode] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir())


def _model_dirs(root: Path) -> list[tuple[str, Path]]:
    """(model, folder holding privateshared/) for a pair folder, a version folder or the runs root."""
    if (root / GAME).is_dir():
        return [(root.name, root)]
    pairs = [(d.name, d) for d in _subdirs(root) if (d / GAME).is_dir()]
    if pairs:
        return pairs
    return [(f"{v.name}/{d.name}", d) for v in _subdirs(root) for d in _subdirs(v) if (d / GAME).is_dir()]


def _episode_dirs(root: Path) -> Iterable[tuple[str, str, int, Path]]:
    for model, model_dir in _model_dirs(root):
        game_dir = model_dir / GAME
        for exp_dir in _subdirs(game_dir):
            eps = []
            for ep_dir in exp_dir.iterdir():
                m = _EPISODE.match(ep_dir.name)
                if m and ep_dir.is_dir():
                    eps.append((int(m.group(1)), ep_dir))
            for k, ep_dir in sorted(eps):
                yield model, exp_dir.name, k, ep_dir


def read_episode(path: Path) -> tuple[EpisodeRecord, dict[str, Any]]:
    """Read and score one interactions.json; raises ValueError with `<file>: <field>: <problem>`."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ClembenchError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(strip_bom(raw.decode("utf-8")))
    except json.JSONDecodeError as exc:
        raise ClembenchError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ClembenchError(f"{path}: arrays or objects nested too deeply to read; not a clembench record") from None
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ClembenchError(f"{path}: line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
    try:
        record = from_interactions(data)
    except RecordError as exc:
        raise ClembenchError(f"{path}: {exc}") from None
    return record, score_interactions(record.to_interactions())


def read_results(root: Path | str) -> ReadResult:
    """Every scorekeeping episode under a clembench results folder, scored; bad ones as error lines."""
    result = ReadResult()
    result.episodes = list(iter_results(root, result))
    return result


def iter_results(root: Path | str, result: ReadResult) -> Iterator[ClembenchEpisode]:
    """read_results one episode at a time (memory does not grow with the folder): each episode
    is yielded once read and scored; error and warning lines go to `result`."""
    root = Path(root)
    if not root.is_dir():
        result.errors.append(f"{root}: not a folder")
        return
    found = False
    for model, experiment, k, ep_dir in _episode_dirs(root):
        found = True
        path = ep_dir / "interactions.json"
        if not path.is_file():
            result.errors.append(f"{path}: missing file")
            continue
        try:
            record, scores = read_episode(path)
        except ValueError as exc:
            result.errors.append(str(exc))
            continue
        published = _published(ep_dir / "scores.json", result.warnings)
        if published is not None:
            diffs = score_differences(published, scores)
            if diffs:  # one line per file; the episode keeps pxp's scores
                result.warnings.append(f"{ep_dir / 'scores.json'}: differs from pxp's re-scoring: {'; '.join(diffs)}")
        yield ClembenchEpisode(model, experiment, k, record, scores, path, published)
    if not found:
        result.errors.append(f"{root}: no {GAME} episodes found (expected [<version>/]<model>/{GAME}/"
                             f"<experiment>/episode_<k>/interactions.json)")


def _published(path: Path, warnings: list[str]) -> dict[str, Any] | None:
    """clembench's scores.json (NaN literals allowed), or None with a warning line if unreadable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        warnings.append(f"{path}: unreadable, ignored: {str(exc).splitlines()[0]}")
        return None
    if not isinstance(data, dict) or not isinstance(data.get("episode scores"), dict):
        warnings.append(f"{path}: no \"episode scores\" object, ignored")
        return None
    return data


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) or not isinstance(b, int | float):
        return bool(a == b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def score_differences(published: dict[str, Any], scores: dict[str, Any]) -> list[str]:
    """Where clembench's scores.json and pxp's re-scoring differ: one short phrase per score."""
    out = []
    mine, theirs = scores["episode scores"], published.get("episode scores", {})
    for key in sorted(set(mine) | set(theirs)):
        if key not in theirs or key not in mine or not _same(theirs[key], mine[key]):
            out.append(f"{key!r} {theirs.get(key, 'absent')!r} there, {mine.get(key, 'absent')!r} re-scored")
    turns = published.get("turn scores")
    if isinstance(turns, dict):
        my_turns = {str(t): v for t, v in scores["turn scores"].items()}
        for t in sorted(set(turns) | set(my_turns), key=lambda x: (len(x), x)):
            a, b = turns.get(t), my_turns.get(t)
            if not isinstance(a, dict) or not isinstance(b, dict):
                out.append(f"turn {t} {'absent' if a is None else 'present'} there, "
                           f"{'absent' if b is None else 'present'} re-scored")
                continue
            for key in sorted(set(a) | set(b)):
                if key not in a or key not in b or not _same(a[key], b[key]):
                    out.append(f"turn {t} {key!r} {a.get(key, 'absent')!r} there, {b.get(key, 'absent')!r} re-scored")
    return out


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
