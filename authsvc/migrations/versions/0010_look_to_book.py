"""An account's look-to-book target (searches per confirmed booking; 0: none) and when an account's
traffic alerts (look-to-book, anomalies) were last sent, so each is sent at most as often as its rule says.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("auth_accounts") as batch:
        batch.add_column(
            sa.Column("look_to_book_target", sa.BigInteger(), server_default="0", nullable=False)
        )
    op.create_table(
        "auth_traffic_alerts",
        sa.Column("account_id", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("sent_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "kind"),
    )


def downgrade() -> None:
    op.drop_table("auth_traffic_alerts")
    with op.batch_alter_table("auth_accounts") as batch:
        batch.drop_column("look_to_book_target")
