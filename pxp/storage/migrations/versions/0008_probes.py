"""probe: common-ground probe answers inside PXP sessions (docs/research.md, Common-ground probe)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 11:00:00.000000
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('probe',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=False),
    sa.Column('j', sa.Integer(), nullable=False),
    sa.Column('question', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('truth', sa.Boolean(), nullable=False),
    sa.Column('answer', sa.Boolean(), nullable=True),
    sa.Column('valid', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['session.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('session_id', 'j', 'question', name='uq_probe_session_j_question')
    )
    op.create_index(op.f('ix_probe_session_id'), 'probe', ['session_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_probe_session_id'), table_name='probe')
    op.drop_table('probe')
