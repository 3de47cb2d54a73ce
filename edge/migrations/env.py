"""Run by Alembic for every command on edge's migrations (at start and from the alembic CLI)."""

from edge.idempotency import metadata
from edge.migrations import SCHEMA
from svckit.migrations import run_env

run_env(SCHEMA, metadata)
