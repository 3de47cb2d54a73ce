"""Idempotency claims name their owner and carry a heartbeat (edge.idempotency_claims): two nullable
columns, NULL on rows an older release wrote (its claims are taken over as before, after 120 s).
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("edge_idempotency") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("heartbeat_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("edge_idempotency") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("owner")
