"""edge's Alembic environment (env.py, versions/): see svckit.migrations and docs/architecture.md."""

from svckit.migrations import Schema

SCHEMA = Schema(
    service="edge",
    prefix="edge_",
    legacy_table="edge_schema_version",
    adopt={1: "0001"},
)
