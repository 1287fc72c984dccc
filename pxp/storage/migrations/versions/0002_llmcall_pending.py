"""llmcall_pending: calls sent and not yet stored (outcome unknown after a crash)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 08:00:00
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('llmcall_pending',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('experiment_id', sa.Integer(), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('session_id', sa.Integer(), nullable=True),
    sa.Column('j', sa.Integer(), nullable=True),
    sa.Column('provider', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('purpose', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('sent_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('llmcall_pending', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_llmcall_pending_experiment_id'), ['experiment_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('llmcall_pending', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_llmcall_pending_experiment_id'))
    op.drop_table('llmcall_pending')
