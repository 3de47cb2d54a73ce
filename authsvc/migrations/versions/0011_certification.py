"""Certification: whether an account must be certified before it may create live keys (operator-set, off
for every existing account, so nothing changes for them), when it was certified, the run open for it;
the runs, the requests the edge recorded for a run's key, and the platform's report-signing keys (the
private half sealed).
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"

_ACCOUNT_COLUMNS = (
    ("certified_at", sa.Float()),
    ("cert_run_id", sa.String(length=40)),
    ("cert_run_key_id", sa.String(length=40)),
    ("cert_run_ends_at", sa.Float()),
    ("cert_fault_every", sa.Integer()),
)


def upgrade() -> None:
    # Plain ADD COLUMN (not a batch table copy): other tables' foreign keys point at auth_accounts.
    op.add_column(
        "auth_accounts",
        sa.Column("require_certification", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    for name, type_ in _ACCOUNT_COLUMNS:
        op.add_column("auth_accounts", sa.Column(name, type_, nullable=True))
    op.create_table(
        "auth_cert_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ends_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("fault_every", sa.Integer(), nullable=False),
        sa.Column("posts", sa.Integer(), nullable=False),
        sa.Column("unauthorized_until", sa.Float(), nullable=True),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("probes", sa.Text(), nullable=False),
        sa.Column("report", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("auth_cert_runs_account", "auth_cert_runs", ["account_id", "started_at"], unique=False)
    op.create_table(
        "auth_cert_requests",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=10), nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("error_type", sa.String(length=64), nullable=False),
        sa.Column("idempotency_key_digest", sa.String(length=64), nullable=False),
        sa.Column("body_digest", sa.String(length=64), nullable=False),
        sa.Column("fault", sa.String(length=24), nullable=False),
        sa.Column("retry_after", sa.Integer(), nullable=False),
        sa.Column("probe", sa.Boolean(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "request_id"),
    )
    op.create_table(
        "auth_cert_keys",
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("public_key", sa.String(length=60), nullable=False),
        sa.Column("private_key", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key_id"),
    )


def downgrade() -> None:
    op.drop_table("auth_cert_keys")
    op.drop_table("auth_cert_requests")
    op.drop_index("auth_cert_runs_account", table_name="auth_cert_runs")
    op.drop_table("auth_cert_runs")
    for name, _ in reversed(_ACCOUNT_COLUMNS):
        op.drop_column("auth_accounts", name)
    op.drop_column("auth_accounts", "require_certification")
