"""The audit trail survives kill -9 at every commit point (docs/operations.md "Login and roles", DESIGN §3).

A claim, an answer and a take-over write their audit row in the transaction that stores them, so
a process killed at any moment leaves both or neither. A child process runs a live scenario (claim,
the machine's INIT, a human answer, the machine's reply, a take-over and the taker's answer) and
kills itself with SIGKILL as it is about to commit its N-th transaction; the parent then checks
that every stored human message has its "answered" row and every claim its "opened" or
"took over" row, for N = 1, 2, ... until the scenario runs to its end. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from sqlalchemy import Engine, func, select
from sqlmodel import col

from pxp.running.pxp.live.assignment import create_live_experiment, ensure_annotator
from pxp.storage.tables import AuditEvent, Claim, Message
from tests.factories import make_rad

CHILD = textwrap.dedent("""
    import os, signal, sys
    from sqlalchemy import event
    from pxp.agents.base import Answer, Facts
    from pxp.protocols.pxp.rules import Sender
    from pxp.running.pxp.live.abandonment import take_over
    from pxp.running.pxp.live.assignment import claim_next
    from pxp.running.pxp.live.turns import load_session, machine_for, machine_step, submit_human
    from pxp.storage.store import make_engine

    url, eid, ann, bob, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    engine = make_engine(url)
    commits = 0

    def on_commit(conn):
        global commits
        commits += 1
        if commits == kill_at:  # the transactions before this one are committed, this one is not
            os.kill(os.getpid(), signal.SIGKILL)

    event.listen(engine, "commit", on_commit)
    machine = machine_for(engine, eid)

    def answer(sid):
        s = load_session(engine, sid)
        theirs = s.last_from(Sender.MACHINE).prediction
        mine = next(lab for lab in s.labels if lab != theirs)
        out = submit_human(engine, sid, j=s.j, answer=Answer(mine, "My own reading of this film differs."),
                           facts=Facts(match=False, agree=False, changed=False))
        assert out.status == "sent", out.message

    sid = claim_next(engine, experiment_id=eid, annotator_id=ann)
    machine_step(engine, sid, machine)
    answer(sid)
    machine_step(engine, sid, machine)
    assert take_over(engine, session_id=sid, annotator_id=bob, idle_minutes=0)
    answer(sid)
    print("done", commits)
""")


def _unaudited(engine: Engine) -> list[str]:
    """Stored human messages without their "answered" row, and claims without their audit row."""
    with engine.connect() as c:
        answered = set(c.execute(select(AuditEvent.session_id, AuditEvent.j)
                                 .where(AuditEvent.action == "answered")).all())
        opened = set(c.execute(select(AuditEvent.session_id, AuditEvent.annotator_id)
                               .where(col(AuditEvent.action).in_(("opened", "took over")))).all())
        msgs = c.execute(select(Message.session_id, Message.j).where(Message.sender == "human")).all()
        claims = c.execute(select(Claim.session_id, Claim.annotator_id)).all()
    return ([f"message {j} of session {s} has no 'answered' row" for s, j in msgs if (s, j) not in answered]
            + [f"claim of session {s} by annotator {a} has no audit row" for s, a in claims if (s, a) not in opened])


@pytest.mark.long
def test_every_claim_and_answer_is_audited_whenever_the_process_dies(any_engine: Engine) -> None:
    make_rad(any_engine)
    ann = ensure_annotator(any_engine, name="ann")
    bob = ensure_annotator(any_engine, name="bob")
    url = any_engine.url.render_as_string(hide_password=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    killed = 0
    for kill_at in range(1, 60):
        eid = create_live_experiment(any_engine, dataset="toy-rad", name=f"kill at {kill_at}", n=10, k=3)
        p = subprocess.run([sys.executable, "-c", CHILD, url, str(eid), str(ann), str(bob), str(kill_at)],
                           capture_output=True, text=True, timeout=120, env=env)
        assert _unaudited(any_engine) == [], f"killed at commit {kill_at}"
        if p.returncode == -signal.SIGKILL:
            killed += 1
            continue
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.startswith("done")
        break
    else:
        raise AssertionError("the scenario never ran to its end")
    assert killed >= 5  # claim, INIT, answer, reply, take-over, answer: each commit was a kill point
    with any_engine.connect() as c:  # the kills left stored messages and claims behind to check
        assert c.execute(select(func.count()).select_from(Claim)).scalar_one() >= killed
