"""The request log: one row per partner request the edge answered (metadata only), and the records offered
per account and day (the daily bound).
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.create_table(
        "auth_requests",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("key_hint", sa.String(length=40), nullable=False),
        sa.Column("method", sa.String(length=10), nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("error_type", sa.String(length=64), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("occurred_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("request_id"),
    )
    op.create_index(
        "auth_requests_account", "auth_requests", ["account_id", "environment", "occurred_at"], unique=False
    )
    op.create_index("auth_requests_time", "auth_requests", ["occurred_at"], unique=False)
    op.create_table(
        "auth_request_counts",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("offered", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "day"),
    )


def downgrade() -> None:
    op.drop_table("auth_request_counts")
    op.drop_index("auth_requests_time", table_name="auth_requests")
    op.drop_index("auth_requests_account", table_name="auth_requests")
    op.drop_table("auth_requests")
