"""session_attempt: earlier attempts at a session run again from its start (format-aborted
sessions of a paused run, re-run on resume)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 05:40:00.000000
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('session_attempt',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('abort_reason', sa.Text(), nullable=True),
    sa.Column('messages', sa.JSON(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['session.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('session_id', 'attempt', name='uq_session_attempt')
    )
    op.create_index(op.f('ix_session_attempt_session_id'), 'session_attempt', ['session_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_session_attempt_session_id'), table_name='session_attempt')
    op.drop_table('session_attempt')
