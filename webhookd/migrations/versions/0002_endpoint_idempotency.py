"""The idempotency keys of endpoint registrations and rotations (kept 24 h).

The previous release's migration 2 (``wh_schema_version`` at 2 is stamped here).
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "wh_idempotency",
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "environment", "idempotency_key"),
    )


def downgrade() -> None:
    op.drop_table("wh_idempotency")
