"""webhookd's Alembic environment (env.py, versions/): see svckit.migrations and docs/architecture.md."""

from svckit.migrations import Schema

SCHEMA = Schema(
    service="webhookd",
    prefix="wh_",
    legacy_table="wh_schema_version",
    adopt={1: "0001", 2: "0002"},
)
