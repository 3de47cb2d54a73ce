"""The attempts' scope index also holds the outcome, so GetAttemptStats (the portal's success rates)
counts attempts and successes from the index alone instead of reading every attempt row (with its
response body); it still serves every query the old index did (its columns are a prefix).
"""

from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_index(
        "wh_attempts_scope_outcome",
        "wh_attempts",
        ["account_id", "environment", "attempted_at", "outcome"],
    )
    op.drop_index("wh_attempts_scope", table_name="wh_attempts")


def downgrade() -> None:
    op.create_index("wh_attempts_scope", "wh_attempts", ["account_id", "environment", "attempted_at"])
    op.drop_index("wh_attempts_scope_outcome", table_name="wh_attempts")
