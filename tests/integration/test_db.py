from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from svckit.db import Migration, create_engine, migrate


async def _v1(conn: AsyncConnection) -> None:
    await conn.exec_driver_sql("CREATE TABLE demo_items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")


async def _v2(conn: AsyncConnection) -> None:
    await conn.exec_driver_sql("ALTER TABLE demo_items ADD COLUMN note TEXT")


async def test_migrations_apply_once_in_order(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        assert await migrate(engine, "demo", [Migration(1, "items", _v1)]) == 1
        assert await migrate(engine, "demo", [Migration(1, "items", _v1), Migration(2, "note", _v2)]) == 2
        assert await migrate(engine, "demo", [Migration(1, "items", _v1), Migration(2, "note", _v2)]) == 2
        async with engine.begin() as conn:
            await conn.execute(sa.text("INSERT INTO demo_items (id, name, note) VALUES (1, 'a', 'b')"))
            rows = (await conn.execute(sa.text("SELECT version FROM demo_schema_version ORDER BY 1"))).all()
        assert [r[0] for r in rows] == [1, 2]
    finally:
        await engine.dispose()
