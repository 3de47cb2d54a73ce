"""Exact delivery-attempt counts per endpoint and outcome, per hour and per day, with a latency
histogram (webhookd._delivery_counts). Expand-only: a new table the previous release never reads.

Revision ID: 0015
Revises: 0010
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# svckit.usagecounts.BUCKETS, as of this revision.
BUCKETS = 12


def upgrade() -> None:
    op.create_table(
        "wh_delivery_counts",
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("grain", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("period", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("latency_sum_ms", sa.BigInteger(), nullable=False),
        *(sa.Column(f"lat_{i}", sa.BigInteger(), nullable=False) for i in range(BUCKETS)),
        sa.PrimaryKeyConstraint("account_id", "environment", "grain", "period", "endpoint_id", "outcome"),
    )
    op.create_index("wh_delivery_counts_period", "wh_delivery_counts", ["grain", "period"], unique=False)


def downgrade() -> None:
    op.drop_index("wh_delivery_counts_period", table_name="wh_delivery_counts")
    op.drop_table("wh_delivery_counts")
