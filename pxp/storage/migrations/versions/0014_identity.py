"""identity: the UTS #39 skeleton of team members', datasets' and experiments' names under a
unique index, so look-alike names are one identity (docs/development.md "The text rule").
Existing rows get theirs; of rows already stored with one skeleton, the oldest keeps it and the
others keep none (they stay readable; `pxp users list` shows them to remove).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 11:50:00.000000
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel

from pxp.protocols.text import skeleton


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

_COLUMN = sqlmodel.sql.sqltypes.AutoString(length=1000)


def _fill(table: str, by_kind: bool) -> None:
    conn = op.get_bind()
    kind = "kind" if by_kind else "''"
    rows = conn.execute(sa.text(f"SELECT id, {kind}, name FROM {table} ORDER BY id")).all()
    seen: set[tuple[str, str]] = set()
    for row_id, kind, name in rows:
        key = (kind, skeleton(name))
        if key not in seen:
            seen.add(key)
            conn.execute(sa.text(f"UPDATE {table} SET identity = :k WHERE id = :i"), {"k": key[1], "i": row_id})


def upgrade() -> None:
    # a column and a unique index each: SQLite adds both in place (no copy of a table others refer to)
    for table in ('team_member', 'dataset', 'experiment'):
        op.add_column(table, sa.Column('identity', _COLUMN, nullable=True))
        _fill(table, by_kind=table == 'team_member')
    op.create_index('ix_team_member_kind_identity', 'team_member', ['kind', 'identity'], unique=True)
    for table in ('dataset', 'experiment'):
        op.create_index(f'ix_{table}_identity', table, ['identity'], unique=True)


def downgrade() -> None:
    for table in ('dataset', 'experiment'):
        op.drop_index(f'ix_{table}_identity', table_name=table)
    op.drop_index('ix_team_member_kind_identity', table_name='team_member')
    for table in ('team_member', 'dataset', 'experiment'):
        op.drop_column(table, 'identity')
