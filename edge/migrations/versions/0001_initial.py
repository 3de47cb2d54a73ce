"""edge's schema as the previous release left it, frozen: idempotency records.

A database made by the previous release (its ``edge_schema_version`` at 1) is stamped here
without running this. Never edit it: change the schema in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "edge_idempotency",
        sa.Column("account_id", sa.String(length=64), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("idem_key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("headers", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("claimed_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "environment", "idem_key"),
    )
    op.create_index("edge_idempotency_created", "edge_idempotency", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("edge_idempotency")
