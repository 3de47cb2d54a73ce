"""A key's own rate limit (requests a second across all edges; 0: the environment's default).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.add_column(sa.Column("rate_limit", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.drop_column("rate_limit")
