"""authsvc revision 0006 adds auth_keys.rotated_at and fills it, for keys rotated before it existed, from
their successor's creation time -- on SQLite and PostgreSQL, from a database at revision 0005 with data."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from authsvc.migrations import SCHEMA as AUTHSVC
from svckit.db import create_engine
from svckit.migrations import config, head, upgrade

ROWS = """
INSERT INTO auth_accounts
  (id, name, mode, status, admin_emails, daily_search_allowance, created_at, updated_at)
  VALUES ('acct_m1', 'P', 'a', 'active', '[]', 10, 100.0, 100.0);
INSERT INTO auth_keys (id, account_id, environment, name, scopes, allowed_sources, hint, secret_hash,
  created_at, expires_at, rotated_to_key_id, rotated_from_key_id)
  VALUES ('key_old', 'acct_m1', 'live', 'k', '[]', '[]', 'h', 'hash-old', 100.0, 90000.0, 'key_new', '');
INSERT INTO auth_keys (id, account_id, environment, name, scopes, allowed_sources, hint, secret_hash,
  created_at, expires_at, rotated_to_key_id, rotated_from_key_id)
  VALUES ('key_new', 'acct_m1', 'live', 'k', '[]', '[]', 'h', 'hash-new', 3600.5, NULL, '', 'key_old');
INSERT INTO auth_keys (id, account_id, environment, name, scopes, allowed_sources, hint, secret_hash,
  created_at, expires_at, rotated_to_key_id, rotated_from_key_id)
  VALUES ('key_plain', 'acct_m1', 'live', 'k', '[]', '[]', 'h', 'hash-plain', 200.0, NULL, '', '');
"""


async def test_rotated_at_is_filled_from_the_successor(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.upgrade(config(AUTHSVC, c), "0005"))
            for statement in filter(str.strip, ROWS.split(";")):
                await conn.exec_driver_sql(statement)
        assert await upgrade(engine, AUTHSVC) == head(AUTHSVC)
        async with engine.connect() as conn:
            found = await conn.execute(sa.text("SELECT id, rotated_at FROM auth_keys ORDER BY id"))
            rows: dict[str, float | None] = dict(found.tuples().all())
        assert rows == {"key_new": None, "key_old": 3600.5, "key_plain": None}
    finally:
        await engine.dispose()
