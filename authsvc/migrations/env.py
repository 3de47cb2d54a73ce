"""Run by Alembic for every command on authsvc's migrations (at start and from the alembic CLI)."""

import authsvc._identity_sql  # noqa: F401  (its tables join the MetaData)
from authsvc._sql import metadata
from authsvc.migrations import SCHEMA
from svckit.migrations import run_env

run_env(SCHEMA, metadata)
