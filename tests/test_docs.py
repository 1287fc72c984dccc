"""Every shell command in the README and the guides in docs/ runs, so the docs cannot rot
(docs/development.md, Tests).

Each fenced `bash` block runs as one bash script (`set -eo pipefail`; an ERR trap names the
command that failed); the blocks of one document run in order, in one temporary working
directory with its own SQLite database (`PXP_DATABASE_URL`) and a `pxp-study/` folder of study files
generated in the published format (tests/study_sample.py), where the guides import them from. `pxp`
is this checkout's (a script on PATH running `python -m pxp.cli.main`). Markers after `bash` in the fence's info string:

- `needs-llm`: run with the local wire-format LLM server (tests/llm_server.py) as the Anthropic
  and OpenAI endpoints; the documented local server URL `http://127.0.0.1:11434/v1` is replaced
  by its URL, and `export ..._API_KEY=...` sets a stand-in key it accepts.
- `needs-postgres`: run against a fresh PostgreSQL database (the `pg_url` fixture, which fails
  in CI when PostgreSQL is missing, like every PostgreSQL test); the example URL
  `postgresql+psycopg://team@db/pxp` (and `postgresql://team@db/pxp`) is replaced by it.
- `needs-server`: each line starts a server (`pxp app`); it is started with `--port` of a free
  port, the test waits until its health endpoint answers, then stops it.
- `parse-only`: installs, the whole test suite and benchmarks, which take minutes: `bash -n`
  checks the syntax, each command's program must be on PATH, each repository file a command
  names must exist, and a Python file it runs must compile. These are not executed here.

A ```` ```toml file=NAME ```` block is written to NAME in the working directory first (a grid
file the next block uses). Other fences (text, json) are not commands.

The repository stands alone: no document and no file of pxp/ points outside it (to `../shared`), and
the test vectors of docs/protocol.md are the ones pxp computes and tests/protocols tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import py_compile
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pxp.protocols.pxp.intelligibility import METRICS, session_flags
from pxp.protocols.pxp.rules import Sender, Tag, agent_tag
from tests.llm_server import FakeLLM, Reply, Request, adopting_model, answer
from tests.running.test_scorekeeping_run import careful_player
from tests.study_sample import Study

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKERS = {"needs-llm", "needs-postgres", "needs-server", "parse-only"}
EXAMPLE_PG = ("postgresql+psycopg://team@db/pxp", "postgresql://team@db/pxp")
LOCAL_LLM = "http://127.0.0.1:11434/v1"
FENCE = re.compile(r"^```(\S*)(.*)$")


@dataclass
class Block:
    """One fenced block: where it starts, its language, its markers, its text."""

    doc: Path
    line: int
    lang: str
    info: set[str]
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, in order."""
    out: list[Block] = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        out.append(Block(doc, start, m.group(1), set(m.group(2).split()), "\n".join(body) + "\n"))
        i += 1
    return out


def commands(text: str) -> list[str]:
    """The commands of a block, one per line (comments and blank lines left out)."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


PRELUDE = """set -eo pipefail
trap 'rc=$?; echo "DOCS-ERR $LINENO $rc" >&2' ERR
"""
PRELUDE_LINES = PRELUDE.count("\n")


def run_script(block: Block, script: str, cwd: Path, env: dict[str, str]) -> None:
    res = subprocess.run(["bash", "-c", PRELUDE + script], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=300)
    if res.returncode == 0:
        return
    failed = re.findall(r"DOCS-ERR (\d+) (\d+)", res.stderr)
    where, what = block.where, "a documented command failed"
    if failed:
        n, rc = (int(x) for x in failed[-1])
        lines = script.splitlines()
        i = n - PRELUDE_LINES - 1
        where = f"{block.doc.relative_to(REPO)}:{block.line + 1 + i}"
        what = f"`{lines[i].strip() if 0 <= i < len(lines) else '?'}` exited {rc}"
    pytest.fail(f"{where}: {what}\n{res.stderr[-3000:]}\n{res.stdout[-1500:]}")


def doc_llm(req: Request) -> Reply:
    """The stand-in provider for the docs' LLM commands: RAD answers that adopt the other side's,
    a lexical checker, common-ground probes answered yes, the scorekeeping answerer played well."""
    body = json.dumps(req.body)
    if "ANSWER:" in body and "ASIDE:" in body and not req.is_checker and "Prediction" not in body:
        return careful_player(req)
    if "ASIDE" in req.last_user_text():
        return Reply(text="ASIDE: yes")
    return adopting_model(lambda r: answer("Pneumonia", "patchy consolidation in the left lower zone"))(req)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(block: Block, cmd: str, cwd: Path, env: dict[str, str]) -> None:
    """Start the documented server on a free port, wait until it answers, stop it."""
    port = free_port()
    proc = subprocess.Popen(["bash", "-c", PRELUDE + f"exec {cmd.split('#')[0]} --port {port}"], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(1200):  # up to 120 s, polling until the server answers or exits
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"{block.where}: `{cmd}` exited {proc.returncode}\n{out[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                    assert r.status == 200
                    return
            except OSError:
                _pause(proc)
        pytest.fail(f"{block.where}: `{cmd}` did not answer on port {port}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _pause(proc: subprocess.Popen[bytes]) -> None:
    """Wait a tenth of a second for the process (it may exit meanwhile)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)


def check_parse_only(block: Block) -> None:
    """Syntax, programs on PATH, the repository files the commands name, Python files compile."""
    res = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    assert res.returncode == 0, f"{block.where}: {res.stderr}"
    for line in commands(block.text):
        for part in re.split(r"&&|\|\||;|\|", line.split(" #")[0]):
            words = shlex.split(part)
            if not words:
                continue
            assert shutil.which(words[0]), f"{block.where}: `{words[0]}` is not on PATH"
            for w in words[1:]:
                if re.fullmatch(r"[\w./-]+\.(py|toml|txt)", w):
                    assert (REPO / w).is_file(), f"{block.where}: `{w}` does not exist"
                    if w.endswith(".py"):
                        py_compile.compile(str(REPO / w), doraise=True)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(doc_llm) as s:
        yield s


@pytest.mark.long
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_documented_command_runs(doc: Path, tmp_path: Path, request: pytest.FixtureRequest,
                                       generated_study: Study) -> None:
    found = blocks(doc)
    assert any(b.lang == "bash" for b in found), f"{doc.name}: no bash block"
    cwd = tmp_path / "work"
    shutil.copytree(generated_study.root, cwd / "pxp-study")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pxp").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m pxp.cli.main "$@"\n')
    (bin_dir / "pxp").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO),
           "PXP_DATABASE_URL": f"sqlite:///{cwd / 'pxp.db'}",
           "COLUMNS": "120", "PXP_LLM_MAX_RETRIES": "0"}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    for b in found:
        assert not (b.info - MARKERS - {i for i in b.info if i.startswith("file=")}), f"{b.where}: unknown marker"
        if b.lang == "toml" and any(i.startswith("file=") for i in b.info):
            name = next(i for i in b.info if i.startswith("file="))[5:]
            (cwd / name).write_text(b.text)
        if b.lang != "bash":
            continue
        script, benv = b.text, dict(env)
        if "parse-only" in b.info:
            check_parse_only(b)
            continue
        if "needs-server" in b.info:
            for cmd in commands(b.text):
                serve(b, cmd, cwd, benv)
            continue
        if "needs-postgres" in b.info:
            url = request.getfixturevalue("pg_url")
            script = script.replace(EXAMPLE_PG[0], url).replace(EXAMPLE_PG[1], url.replace("+psycopg", ""))
        if "needs-llm" in b.info:
            server: FakeLLM = request.getfixturevalue("llm")
            benv.update(ANTHROPIC_BASE_URL=server.url, OPENAI_BASE_URL=server.openai_url,
                        ANTHROPIC_API_KEY="sk-test-not-a-key", OPENAI_API_KEY="sk-test-not-a-key")
            script = script.replace(LOCAL_LLM, server.openai_url)
        run_script(b, script, cwd, benv)


def test_the_readme_stays_short_and_points_at_the_guides() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for guide in ("annotating", "research", "operations", "development", "accessibility"):
        assert f"(docs/{guide}.md)" in text and (REPO / "docs" / f"{guide}.md").is_file()
    assert (REPO / "docs" / "annotate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


OUTSIDE = re.compile(r"\.\./+shared\b")


def test_nothing_points_outside_the_repository() -> None:
    """A clone with nothing beside it has every file the documents and the code name."""
    files = [*DOCS, *sorted(p for p in (REPO / "pxp").rglob("*") if p.is_file() and p.suffix != ".pyc")]
    assert len(DOCS) >= 6 and any(p.name == "protocol.md" for p in DOCS)
    found = [f"{p.relative_to(REPO)}:{i}" for p in files
             for i, line in enumerate(p.read_bytes().decode("utf-8", "replace").splitlines(), start=1)
             if OUTSIDE.search(line)]
    assert found == []
    assert OUTSIDE.search("the spec in `../shared/DESIGN.md`")  # the pattern catches what it is for


def _table(doc: Path, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header row starts with `header`, as cells."""
    lines = doc.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


YES = {"yes": True, "no": False}


def test_protocol_md_intelligibility_vectors_are_what_pxp_computes() -> None:
    from tests.protocols.test_intelligibility import V1, V2, V4

    rows = _table(REPO / "docs" / "protocol.md", "session")
    senders = {"m": Sender.MACHINE, "h": Sender.HUMAN}
    sessions = []
    for cells in rows:
        tags = [(senders[w.split()[0]], Tag[w.split()[1]]) for w in cells[0].split(", ")]
        assert [YES[c] for c in cells[1:]] == [session_flags(tags)[m] for m in METRICS], cells[0]
        sessions.append(tags)
    assert sessions == [V1, V2, V4]


def test_protocol_md_agent_rule_table_is_what_pxp_computes() -> None:
    rows = _table(REPO / "docs" / "protocol.md", "match")
    assert len(rows) == 11
    for match, agree, changed, jk, tag in rows:
        j, k = (int(x) for x in jk.split(", "))
        assert agent_tag(j, k, YES[match], YES[agree], YES[changed]) is Tag[tag], (match, agree, changed, jk)


def test_protocol_md_scorekeeping_examples_are_what_pxp_computes() -> None:
    """The worked episodes of protocol.md, played by the scripted answerers of tests/protocols/scorekeeping."""
    import importlib.util

    from pxp.protocols.scorekeeping.episode import play_episode
    from pxp.protocols.scorekeeping.scores import score_interactions

    spec = importlib.util.spec_from_file_location("sk_helpers", REPO / "tests/protocols/scorekeeping/sk_helpers.py")
    assert spec is not None and spec.loader is not None
    sk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sk)
    answerers = {"right values, truthful probes": sk.Scripted(),
                 'right values, every probe "no"': sk.Scripted(probe=lambda r, s: False),
                 'right values, every probe "yes"': sk.Scripted(probe=lambda r, s: True),
                 "one wrong value (turn 2), truthful probes": sk.Scripted(answers={2: "ANSWER: by plane."})}
    rows = _table(REPO / "docs" / "protocol.md", "answerer")
    assert [r[0] for r in rows] == list(answerers)
    names = ["Accuracy", "Kappa", "Middle-Accuracy", "Slot-Filling-Accuracy", "Main Score"]
    for who, *cells in rows:
        episode = score_interactions(play_episode(sk.instance(), answerers[who], model="m").to_interactions())
        assert [float(c) for c in cells] == [round(episode["episode scores"][n], 2) for n in names], who
