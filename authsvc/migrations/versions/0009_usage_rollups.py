"""Usage counts: exact rollups of answered partner requests per minute, hour and day, and the batch ids
already applied (authsvc._sql_usage_tables).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# svckit.usagecounts.BUCKETS (the histogram's columns), as of this revision.
BUCKETS = 12
ROLLUPS = ("auth_usage_minute", "auth_usage_hour", "auth_usage_day")


def upgrade() -> None:
    for name in ROLLUPS:
        op.create_table(
            name,
            sa.Column("account_id", sa.String(length=40), nullable=False),
            sa.Column("period", sa.BigInteger(), autoincrement=False, nullable=False),
            sa.Column("environment", sa.String(length=8), nullable=False),
            sa.Column("key_id", sa.String(length=40), nullable=False),
            sa.Column("route", sa.String(length=120), nullable=False),
            sa.Column("status", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("error_type", sa.String(length=64), nullable=False),
            sa.Column("count", sa.BigInteger(), nullable=False),
            sa.Column("latency_sum_ms", sa.BigInteger(), nullable=False),
            *(sa.Column(f"lat_{i}", sa.BigInteger(), nullable=False) for i in range(BUCKETS)),
            sa.PrimaryKeyConstraint(
                "account_id", "period", "environment", "key_id", "route", "status", "error_type"
            ),
            # SQLite: rows stored in key order (one account's periods read in one pass).
            sqlite_with_rowid=False,
        )
        op.create_index(f"{name}_period", name, ["period"], unique=False)
    op.create_table(
        "auth_usage_batches",
        sa.Column("batch_id", sa.String(length=80), nullable=False),
        sa.Column("applied_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("batch_id"),
    )
    op.create_index("auth_usage_batches_time", "auth_usage_batches", ["applied_at"], unique=False)


def downgrade() -> None:
    op.drop_index("auth_usage_batches_time", table_name="auth_usage_batches")
    op.drop_table("auth_usage_batches")
    for name in reversed(ROLLUPS):
        op.drop_index(f"{name}_period", table_name=name)
        op.drop_table(name)
