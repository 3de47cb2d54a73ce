"""Disable alerts the previous release marked sent without sending (no SMTP server, or no recipient,
configured at the time) are pending again, so they go out once SMTP and recipients are configured.

Those rows carry the reason the previous release wrote in ``error``; a sent alert's ``error`` is empty.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.execute(
        sa.text(
            "UPDATE wh_alerts SET sent_at = NULL, error = '' WHERE sent_at IS NOT NULL"
            " AND error IN ('no SMTP server configured', 'no admin addresses known')"
        )
    )


def downgrade() -> None:
    pass  # nothing to undo: the rows are pending, or sent since
