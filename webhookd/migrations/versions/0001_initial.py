"""webhookd's schema as the previous release left it, frozen: endpoints, events, deliveries,
attempts, alerts.

A database made by the previous release (its ``wh_schema_version`` at 1) is stamped here
without running this. Never edit it: change the schema in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "wh_alerts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("sent_at", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("wh_alerts_pending", "wh_alerts", ["sent_at"], unique=False)
    op.create_table(
        "wh_attempts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("delivery_id", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=False),
        sa.Column("response_body", sa.Text(), nullable=False),
        sa.Column("request_headers", sa.Text(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("attempted_at", sa.BigInteger(), nullable=False),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("wh_attempts_delivery", "wh_attempts", ["delivery_id"], unique=False)
    op.create_index(
        "wh_attempts_scope", "wh_attempts", ["account_id", "environment", "attempted_at"], unique=False
    )
    op.create_index("wh_attempts_time", "wh_attempts", ["attempted_at"], unique=False)
    op.create_table(
        "wh_deliveries",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("schedule_count", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.BigInteger(), nullable=True),
        sa.Column("next_attempt_at", sa.BigInteger(), nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("wh_deliveries_due", "wh_deliveries", ["status", "next_attempt_at"], unique=False)
    op.create_index("wh_deliveries_endpoint", "wh_deliveries", ["endpoint_id", "created_at"], unique=False)
    op.create_index("wh_deliveries_event", "wh_deliveries", ["event_id"], unique=False)
    op.create_index(
        "wh_deliveries_scope", "wh_deliveries", ["account_id", "environment", "created_at"], unique=False
    )
    op.create_table(
        "wh_endpoints",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=False),
        sa.Column("secrets", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "wh_endpoints_scope", "wh_endpoints", ["account_id", "environment", "created_at"], unique=False
    )
    op.create_table(
        "wh_events",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("envelope", sa.LargeBinary(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index(
        "wh_events_idem", "wh_events", ["account_id", "environment", "idempotency_key"], unique=True
    )
    op.create_index("wh_events_scope", "wh_events", ["account_id", "environment", "seq"], unique=False)


def downgrade() -> None:
    op.drop_table("wh_events")
    op.drop_table("wh_endpoints")
    op.drop_table("wh_deliveries")
    op.drop_table("wh_attempts")
    op.drop_table("wh_alerts")
