"""live_claim: who was served which case of a live run (overlap k, docs/research.md, Live experiments and overlap)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 10:50:00

Existing live sessions get their claim rows (one per annotator and case), so nobody who
already saw a case is served it again.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('live_claim',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('instance_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['annotator_id'], ['annotator.id'], ),
    sa.ForeignKeyConstraint(['instance_id'], ['instance.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.ForeignKeyConstraint(['session_id'], ['session.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'instance_id', 'annotator_id', name='uq_claim_annotator_case')
    )
    with op.batch_alter_table('live_claim', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_live_claim_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_live_claim_session_id'), ['session_id'], unique=False)
    op.execute(
        "INSERT INTO live_claim (run_id, instance_id, annotator_id, session_id, created_at) "
        "SELECT s.run_id, s.instance_id, s.annotator_id, MIN(s.id), MIN(s.created_at) "
        "FROM session s JOIN run r ON r.id = s.run_id JOIN experiment e ON e.id = r.experiment_id "
        "WHERE e.mode = 'live' AND s.annotator_id IS NOT NULL "
        "GROUP BY s.run_id, s.instance_id, s.annotator_id"
    )


def downgrade() -> None:
    with op.batch_alter_table('live_claim', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_live_claim_session_id'))
        batch_op.drop_index(batch_op.f('ix_live_claim_annotator_id'))

    op.drop_table('live_claim')
