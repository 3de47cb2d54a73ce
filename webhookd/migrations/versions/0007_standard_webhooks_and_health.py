"""Issue 21, webhook delivery control. Endpoints choose their signature headers: the spec's
X-Service-Signature ("stripe", what every existing endpoint keeps), Standard Webhooks ("standard") or
both; they remember the endpoint.failing level last announced; and the operational events wait in an
outbox (wh_notices) until published.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.add_column(
        "wh_endpoints",
        sa.Column("signature_scheme", sa.String(16), nullable=False, server_default="stripe"),
    )
    op.add_column(
        "wh_endpoints", sa.Column("failing_level", sa.Integer(), nullable=False, server_default="0")
    )
    op.create_table(
        "wh_notices",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("environment", sa.String(16), nullable=False),
        sa.Column("endpoint_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("published_at", sa.BigInteger(), nullable=True),
    )
    op.create_index("wh_notices_pending", "wh_notices", ["published_at", "created_at"])


def downgrade() -> None:
    op.drop_index("wh_notices_pending", table_name="wh_notices")
    op.drop_table("wh_notices")
    op.drop_column("wh_endpoints", "failing_level")
    op.drop_column("wh_endpoints", "signature_scheme")
