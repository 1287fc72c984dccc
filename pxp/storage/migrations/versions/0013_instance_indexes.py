"""instance_indexes: drop the two indexes every import paid for and no query needs: dataset_id
alone (the unique (dataset_id, key) index leads with it) and split (three values)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 15:40:00.000000
"""
from alembic import op


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instance', schema=None) as batch_op:
        batch_op.drop_index('ix_instance_split')
        batch_op.drop_index('ix_instance_dataset_id')


def downgrade() -> None:
    with op.batch_alter_table('instance', schema=None) as batch_op:
        batch_op.create_index('ix_instance_dataset_id', ['dataset_id'], unique=False)
        batch_op.create_index('ix_instance_split', ['split'], unique=False)
