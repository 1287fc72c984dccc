"""scorekeeping: half-played episodes of people playing the answerer in the app (docs/research.md, Scorekeeping game)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:25:00.000000
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sk_play',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('experiment', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('episode', sa.Integer(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('replies', sa.JSON(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['game_id'], ['sk_game.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('game_id', 'model', name='uq_sk_play_model')
    )


def downgrade() -> None:
    op.drop_table('sk_play')
