"""Mode A credit: each account's ledger per environment (limit, held, captured, credits, warning level),
its holds by booking reference, and its entries.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.create_table(
        "auth_ledgers",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("credit_limit", sa.BigInteger(), nullable=False),
        sa.Column("held", sa.BigInteger(), nullable=False),
        sa.Column("captured", sa.BigInteger(), nullable=False),
        sa.Column("credits", sa.BigInteger(), nullable=False),
        sa.Column("warning_level", sa.BigInteger(), nullable=True),
        sa.Column("below_warning", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "environment"),
    )
    op.create_table(
        "auth_credit_holds",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("booking_ref", sa.String(length=128), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "environment", "booking_ref"),
    )
    op.create_table(
        "auth_ledger_entries",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reference", sa.String(length=128), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("available_after", sa.BigInteger(), nullable=False),
        sa.Column("note", sa.String(length=500), nullable=False),
        sa.Column("actor_user", sa.String(length=200), nullable=False),
        sa.Column("actor_service", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index(
        "auth_ledger_entries_account",
        "auth_ledger_entries",
        ["account_id", "environment", "seq"],
        unique=False,
    )
    op.create_index(
        "auth_ledger_entries_ref",
        "auth_ledger_entries",
        ["account_id", "environment", "reference"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("auth_ledger_entries_ref", table_name="auth_ledger_entries")
    op.drop_index("auth_ledger_entries_account", table_name="auth_ledger_entries")
    op.drop_table("auth_ledger_entries")
    op.drop_table("auth_credit_holds")
    op.drop_table("auth_ledgers")
