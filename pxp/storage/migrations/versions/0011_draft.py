"""draft: an annotator's half-typed reply in a session, kept across reloads until it is sent

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 06:40:00.000000
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('draft',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=False),
    sa.Column('j', sa.Integer(), nullable=False),
    sa.Column('content', sa.JSON(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['annotator_id'], ['annotator.id'], ),
    sa.ForeignKeyConstraint(['session_id'], ['session.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('annotator_id', 'session_id', name='uq_draft_annotator_session')
    )
    op.create_index(op.f('ix_draft_session_id'), 'draft', ['session_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_draft_session_id'), table_name='draft')
    op.drop_table('draft')
