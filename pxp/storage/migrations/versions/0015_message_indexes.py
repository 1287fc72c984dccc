"""message_indexes: on PostgreSQL one unique (session_id, j) index INCLUDE (sender, tag) instead of three
indexes on message (that one, the covering (session_id, j, sender, tag) and tag alone): the readers' index-only
scans use it, and every imported message paid for each index (docs/development.md "Imports at dataset scale").
SQLite keeps its indexes (it has no INCLUDE).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 21:50:00.000000
"""
from alembic import op


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.drop_index('ix_message_session_tags', table_name='message')
    op.drop_index('ix_message_tag', table_name='message')
    op.execute('ALTER TABLE message DROP CONSTRAINT uq_message_session_j, '
               'ADD CONSTRAINT uq_message_session_j UNIQUE (session_id, j) INCLUDE (sender, tag)')


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.execute('ALTER TABLE message DROP CONSTRAINT uq_message_session_j, '
               'ADD CONSTRAINT uq_message_session_j UNIQUE (session_id, j)')
    op.create_index('ix_message_tag', 'message', ['tag'], unique=False)
    op.create_index('ix_message_session_tags', 'message', ['session_id', 'j', 'sender', 'tag'], unique=False)
