"""Run by Alembic for every command on webhookd's migrations (at start and from the alembic CLI)."""

from svckit.migrations import run_env
from webhookd._sql import metadata
from webhookd.migrations import SCHEMA

run_env(SCHEMA, metadata)
