"""Portal identity: users, invitations, sessions, failed sign-ins; the audit trail's actor user id."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("auth_audit_events") as batch:
        batch.add_column(sa.Column("actor_user_id", sa.String(length=40), server_default="", nullable=False))
    op.create_table(
        "auth_portal_users",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=200), nullable=False),
        sa.Column("totp_seed", sa.String(length=200), nullable=True),
        sa.Column("totp_pending_seed", sa.String(length=200), nullable=True),
        sa.Column("totp_last_step", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_sign_in_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_index(
        "auth_portal_users_account", "auth_portal_users", ["account_id", "created_at", "id"], unique=False
    )
    op.create_table(
        "auth_portal_invites",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("accepted_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "auth_portal_sessions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=40), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("last_seen_at", sa.Float(), nullable=False),
        sa.Column("source_address", sa.String(length=100), nullable=False),
        sa.Column("user_agent", sa.String(length=300), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index("ix_auth_portal_sessions_user_id", "auth_portal_sessions", ["user_id"], unique=False)
    op.create_table(
        "auth_portal_signin_failures",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("source_address", sa.String(length=100), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index(
        "auth_portal_failures_email", "auth_portal_signin_failures", ["email", "at"], unique=False
    )
    op.create_index(
        "auth_portal_failures_address", "auth_portal_signin_failures", ["source_address", "at"], unique=False
    )


def downgrade() -> None:
    op.drop_table("auth_portal_signin_failures")
    op.drop_table("auth_portal_sessions")
    op.drop_table("auth_portal_invites")
    op.drop_table("auth_portal_users")
    with op.batch_alter_table("auth_audit_events") as batch:
        batch.drop_column("actor_user_id")
