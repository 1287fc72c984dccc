"""pxp.storage.faults.retrying: a step tried again while the database is briefly away (docs/operations.md,
Troubleshooting), against a real SQLite file locked by another connection."""

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from pxp.storage.faults import describe, retrying


def test_a_read_is_tried_again_while_the_file_is_locked_and_a_lasting_fault_is_raised(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    owner = sqlite3.connect(path, isolation_level=None)
    owner.execute("create table t (v integer)")
    owner.execute("insert into t values (7)")
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})
    owner.execute("begin exclusive")  # every other connection now fails with "database is locked"
    tries: list[int] = []
    release_at = [2]

    def read() -> int:
        tries.append(1)
        if len(tries) == release_at[0]:
            owner.execute("commit")  # the lock goes away before this try
        with engine.connect() as conn:
            return int(conn.execute(text("select v from t")).scalar_one())

    assert retrying(read, tries=3, wait=0.01) == 7
    assert len(tries) == 2
    owner.execute("begin exclusive")
    tries.clear()
    release_at[0] = 4  # after the last try
    with pytest.raises(Exception) as lasting:
        retrying(read, tries=3, wait=0.01)
    assert len(tries) == 3 and describe(lasting.value) == "the database is locked by another process"
    tries.clear()
    with pytest.raises(ZeroDivisionError):  # not a database fault: never tried again
        retrying(lambda: tries.append(1) or 1 // 0, tries=3, wait=0.01)
    assert len(tries) == 1
    owner.execute("commit")
    engine.dispose()
    owner.close()
