"""llmcall_thinking: a call's reasoning beside its answer and what was done to fit it (image size,
context shortened); token counts may be unknown (NULL) when a server reports no usage

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 12:20:00.000000
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('llmcall', schema=None) as batch_op:
        batch_op.add_column(sa.Column('thinking', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('detail', sa.JSON(), nullable=True))
        batch_op.alter_column('tokens_in', existing_type=sa.Integer(), nullable=True)
        batch_op.alter_column('tokens_out', existing_type=sa.Integer(), nullable=True)
    with op.batch_alter_table('sk_call', schema=None) as batch_op:
        batch_op.alter_column('tokens_in', existing_type=sa.Integer(), nullable=True)
        batch_op.alter_column('tokens_out', existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE sk_call SET tokens_in = 0 WHERE tokens_in IS NULL")
    op.execute("UPDATE sk_call SET tokens_out = 0 WHERE tokens_out IS NULL")
    op.execute("UPDATE llmcall SET tokens_in = 0 WHERE tokens_in IS NULL")
    op.execute("UPDATE llmcall SET tokens_out = 0 WHERE tokens_out IS NULL")
    with op.batch_alter_table('sk_call', schema=None) as batch_op:
        batch_op.alter_column('tokens_out', existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column('tokens_in', existing_type=sa.Integer(), nullable=False)
    with op.batch_alter_table('llmcall', schema=None) as batch_op:
        batch_op.alter_column('tokens_out', existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column('tokens_in', existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column('detail')
        batch_op.drop_column('thinking')
