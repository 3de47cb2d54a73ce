"""Issue 39, polling endpoints (``webhookd._polls``, docs/webhooks.md "Polling"): the poll queue
(``wh_polled``: one row per pending delivery of a polling endpoint, with its lease), the leases a poll hands
out as cursors (``wh_poll_leases``), and when each polling endpoint was last polled (``wh_pollers``).

Expand-only: new tables that a previous release never reads.

Revision ID: 0014
Revises: 0011
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "wh_polled",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("endpoint_id", sa.String(64), nullable=False),
        sa.Column("event_seq", sa.BigInteger(), nullable=False),
        sa.Column("ordering_key", sa.String(255), nullable=True),
        sa.Column("lease_id", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger(), nullable=True),
        sa.Column("leased_at", sa.BigInteger(), nullable=True),
        sa.Column("leases", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_index("wh_polled_endpoint", "wh_polled", ["endpoint_id", "event_seq"])
    op.create_index("wh_polled_lease", "wh_polled", ["lease_id"])
    op.create_table(
        "wh_poll_leases",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("endpoint_id", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("environment", sa.String(16), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("committed_at", sa.BigInteger(), nullable=True),
        sa.Column("committed", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_index("wh_poll_leases_endpoint", "wh_poll_leases", ["endpoint_id", "expires_at"])
    op.create_table(
        "wh_pollers",
        sa.Column("endpoint_id", sa.String(64), primary_key=True),
        sa.Column("last_polled_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("wh_pollers")
    op.drop_index("wh_poll_leases_endpoint", table_name="wh_poll_leases")
    op.drop_table("wh_poll_leases")
    op.drop_index("wh_polled_lease", table_name="wh_polled")
    op.drop_index("wh_polled_endpoint", table_name="wh_polled")
    op.drop_table("wh_polled")
