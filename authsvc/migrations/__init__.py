"""authsvc's Alembic environment (env.py, versions/): see svckit.migrations and docs/architecture.md."""

from svckit.migrations import Schema

SCHEMA = Schema(
    service="authsvc",
    prefix="auth_",
    legacy_table="auth_schema_version",
    adopt={1: "0001"},
)
