"""Idempotency records (decisions.md "Idempotency"), shared by every edge process through the database.

A POST's Idempotency-Key is scoped to account + environment and kept 24 h. The first request claims
the key (state ``running``); its response, unless a 5xx, is stored (state ``done``) and replayed to a
repeat of the same request (method, path, body hash). A different request under the same key is
idempotency_key_reused (422); a repeat while the first still runs is idempotency_key_in_use (409).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from edge.exceptions import EdgeError
from edge.migrations import SCHEMA
from svckit.migrations import upgrade

RETENTION_SECONDS = 24 * 3600
# A claim older than this belongs to a process that died mid-request; it may be taken over.
STALE_CLAIM_SECONDS = 120

metadata = sa.MetaData()
records = sa.Table(
    "edge_idempotency",
    metadata,
    sa.Column("account_id", sa.String(64), primary_key=True),
    sa.Column("environment", sa.String(16), primary_key=True),
    sa.Column("idem_key", sa.String(255), primary_key=True),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("body", sa.Text, nullable=True),
    sa.Column("headers", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("claimed_at", sa.Float, nullable=False),
    sa.Index("edge_idempotency_created", "created_at"),
)


def request_hash(method: str, path: str, body: bytes) -> str:
    h = hashlib.sha256()
    h.update(method.upper().encode() + b"\n" + path.encode() + b"\n")
    h.update(body)
    return h.hexdigest()


@dataclass(frozen=True)
class Stored:
    status: int
    body: str
    headers: dict[str, str]


class IdempotencyStore(Protocol):
    async def claim(
        self, account_id: str, environment: str, key: str, req_hash: str, now: float
    ) -> Stored | None:
        """None: the caller owns the key now and must complete or release it. Stored: replay it."""
        ...

    async def complete(
        self, account_id: str, environment: str, key: str, status: int, body: str, headers: dict[str, str]
    ) -> None: ...

    async def release(self, account_id: str, environment: str, key: str) -> None: ...

    async def purge(self, now: float) -> int: ...


class SqlIdempotencyStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def migrate(self) -> str:
        return await upgrade(self.engine, SCHEMA)

    @staticmethod
    def _where(account_id: str, environment: str, key: str) -> sa.ColumnElement[bool]:
        return sa.and_(
            records.c.account_id == account_id,
            records.c.environment == environment,
            records.c.idem_key == key,
        )

    async def claim(
        self, account_id: str, environment: str, key: str, req_hash: str, now: float
    ) -> Stored | None:
        where = self._where(account_id, environment, key)
        for _ in range(3):
            try:
                async with self.engine.begin() as conn:
                    query = sa.select(records).where(where)
                    if self.engine.dialect.name == "postgresql":
                        query = query.with_for_update()
                    row = (await conn.execute(query)).mappings().first()
                    if row is not None and row["created_at"] + RETENTION_SECONDS <= now:
                        await conn.execute(sa.delete(records).where(where))
                        row = None
                    if row is None:
                        await conn.execute(
                            sa.insert(records).values(
                                account_id=account_id,
                                environment=environment,
                                idem_key=key,
                                request_hash=req_hash,
                                state="running",
                                created_at=now,
                                claimed_at=now,
                            )
                        )
                        return None
                    if row["request_hash"] != req_hash:
                        raise EdgeError(
                            "this Idempotency-Key was already used for a different request "
                            "(method, path or body differ); use a new key",
                            type="idempotency_key_reused",
                        )
                    if row["state"] == "running":
                        if row["claimed_at"] + STALE_CLAIM_SECONDS > now:
                            raise EdgeError(
                                "a request with this Idempotency-Key is still being processed; retry later",
                                type="idempotency_key_in_use",
                            )
                        await conn.execute(sa.update(records).where(where).values(claimed_at=now))
                        return None
                    return Stored(
                        int(row["status_code"]), str(row["body"]), json.loads(row["headers"] or "{}")
                    )
            except IntegrityError:
                continue  # another process inserted first: read its row
        raise EdgeError("could not claim the Idempotency-Key; retry", type="idempotency_key_in_use")

    async def complete(
        self, account_id: str, environment: str, key: str, status: int, body: str, headers: dict[str, str]
    ) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.update(records)
                .where(self._where(account_id, environment, key))
                .values(state="done", status_code=status, body=body, headers=json.dumps(headers))
            )

    async def release(self, account_id: str, environment: str, key: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.delete(records).where(
                    self._where(account_id, environment, key), records.c.state == "running"
                )
            )

    async def purge(self, now: float) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                sa.delete(records).where(records.c.created_at + RETENTION_SECONDS <= now)
            )
            return int(result.rowcount or 0)
