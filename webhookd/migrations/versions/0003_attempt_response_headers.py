"""Attempts keep the endpoint's response headers (JSON object, capped by the worker).

Rows written before it read as no headers ({}).
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.add_column(
        "wh_attempts", sa.Column("response_headers", sa.Text(), nullable=False, server_default="{}")
    )


def downgrade() -> None:
    op.drop_column("wh_attempts", "response_headers")
