"""scorekeeping: games, episodes (JSON columns) and their calls (docs/research.md, Scorekeeping game)

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-23 10:03:04.928403
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0004'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sk_game',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('answerer', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('sk_game', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sk_game_name'), ['name'], unique=True)

    op.create_table('sk_call',
    sa.Column('provider', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('purpose', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('tokens_in', sa.Integer(), nullable=False),
    sa.Column('tokens_out', sa.Integer(), nullable=False),
    sa.Column('cache_read', sa.Integer(), nullable=False),
    sa.Column('cache_write', sa.Integer(), nullable=False),
    sa.Column('latency_ms', sa.Float(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('episode_key', sqlmodel.sql.sqltypes.AutoString(length=600), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['game_id'], ['sk_game.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('sk_call', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sk_call_game_id'), ['game_id'], unique=False)

    op.create_table('sk_episode',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('game_id', sa.Integer(), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('experiment', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('episode', sa.Integer(), nullable=False),
    sa.Column('aborted', sa.Boolean(), nullable=False),
    sa.Column('main_score', sa.Float(), nullable=True),
    sa.Column('scores', sa.JSON(), nullable=False),
    sa.Column('turn_scores', sa.JSON(), nullable=False),
    sa.Column('interactions', sa.JSON(), nullable=False),
    sa.Column('instance', sa.JSON(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['game_id'], ['sk_game.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('game_id', 'model', 'experiment', 'episode', name='uq_sk_episode_key')
    )


def downgrade() -> None:
    op.drop_table('sk_episode')
    with op.batch_alter_table('sk_call', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sk_call_game_id'))

    op.drop_table('sk_call')
    with op.batch_alter_table('sk_game', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sk_game_name'))

    op.drop_table('sk_game')
