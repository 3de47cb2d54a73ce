"""A key's own rate limit (requests a second across all edges; 0: the environment's default)."""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.add_column(sa.Column("rate_limit", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.drop_column("rate_limit")
