"""authsvc's schema as the previous release left it, frozen: accounts, keys, audit events,
travellers, search usage, outbox.

A database made by the previous release (its ``auth_schema_version`` at 1) is stamped here
without running this. Never edit it: change the schema in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "auth_accounts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("mode", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("admin_emails", sa.Text(), nullable=False),
        sa.Column("daily_search_allowance", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "auth_audit_events",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("actor_user", sa.String(length=200), nullable=False),
        sa.Column("actor_source", sa.String(length=100), nullable=False),
        sa.Column("occurred_at", sa.Float(), nullable=False),
        sa.Column("before", sa.Text(), nullable=False),
        sa.Column("after", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("auth_audit_account", "auth_audit_events", ["account_id", "seq"], unique=False)
    op.create_table(
        "auth_outbox",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=64), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("sent_at", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("last_error", sa.String(length=500), server_default="", nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("auth_outbox_pending", "auth_outbox", ["sent_at", "next_attempt_at"], unique=False)
    op.create_table(
        "auth_search_usage",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("used", sa.BigInteger(), nullable=False),
        sa.Column("threshold_sent", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "day"),
    )
    op.create_table(
        "auth_travellers",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("partner_ref", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("account_id", "environment", "partner_ref", name="auth_travellers_ref"),
    )
    op.create_table(
        "auth_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("allowed_sources", sa.Text(), nullable=False),
        sa.Column("hint", sa.String(length=40), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("revoke_reason", sa.String(length=500), nullable=True),
        sa.Column("last_used_at", sa.Float(), nullable=True),
        sa.Column("rotated_to_key_id", sa.String(length=40), server_default="", nullable=False),
        sa.Column("rotated_from_key_id", sa.String(length=40), server_default="", nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["auth_accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("secret_hash"),
    )
    op.create_index("auth_keys_account", "auth_keys", ["account_id", "created_at", "id"], unique=False)


def downgrade() -> None:
    op.drop_table("auth_keys")
    op.drop_table("auth_travellers")
    op.drop_table("auth_search_usage")
    op.drop_table("auth_outbox")
    op.drop_table("auth_audit_events")
    op.drop_table("auth_accounts")
