"""Idempotency records (decisions.md "Idempotency"), shared by every edge process through the database.

A POST's Idempotency-Key is scoped to account + environment and kept 24 h. The first request claims
the key (state ``running``); its response, unless a 5xx, is stored (state ``done``) and replayed to a
repeat of the same request. "The same request" is its fingerprint (``request_hash``): method, path,
body, and every request header that changes what the request means (``FINGERPRINT_HEADERS``). A
different request under the same key is idempotency_key_reused (422); a repeat while the first still
runs is idempotency_key_in_use (409).

Stored bodies can hold secrets (a new endpoint's signing secret), so they are sealed at rest with
AES-256-GCM (``svckit.secretbox``) under the edge's idempotency key, the record's account, environment
and key as associated data. Without a configured key, bodies holding anything secret-shaped are sealed
with a random key of this process (other bodies stay plain, so processes sharing the database still
replay them). A sealed body that does not open (another process's or another key) is not replayed: the
record is taken over and the request runs again, deduplicated downstream (the Idempotency-Key is passed
to webhookd and the product upstreams).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from edge.exceptions import EdgeError
from edge.migrations import SCHEMA
from svckit.freetext import contains_secret
from svckit.migrations import upgrade
from svckit.secretbox import SealingKeyError, SecretBox

log = logging.getLogger(__name__)

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


# Request headers that change what a request means: the same key, body and path with another value is
# another request (422), not a replay. Lower case.
FINGERPRINT_HEADERS: tuple[str, ...] = ("x-partner-customer-ref", "x-sandbox-trigger")


_HEADER_NAMES = ", ".join(name.title() for name in FINGERPRINT_HEADERS)


def fingerprint_headers(headers: Any) -> dict[str, str]:
    """The ``FINGERPRINT_HEADERS`` a request carries (repeated lines joined with ", "), from a Sanic or
    multidict-like ``headers`` (``getall``)."""
    out: dict[str, str] = {}
    for name in FINGERPRINT_HEADERS:
        values = headers.getall(name, [])
        if values:
            out[name] = ", ".join(values)
    return out


def request_hash(method: str, path: str, body: bytes, headers: Mapping[str, str] | None = None) -> str:
    """SHA-256 of the request's fingerprint. Headers are length-prefixed between the path and the body
    (unambiguous), and absent ones add nothing, so a request without them hashes as before they counted."""
    h = hashlib.sha256()
    h.update(method.upper().encode() + b"\n" + path.encode() + b"\n")
    for name in sorted(headers or {}):
        value = (headers or {})[name].encode("utf-8", "surrogateescape")
        h.update(f"{name.lower()}:{len(value)}:".encode() + value + b"\n")
    h.update(body)
    return h.hexdigest()


def seal_context(account_id: str, environment: str, key: str) -> str:
    """Associated data of a sealed body: it opens only on its own record."""
    return json.dumps(["edge_idempotency", account_id, environment, key])


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
    def __init__(self, engine: AsyncEngine, box: SecretBox | None = None) -> None:
        self.engine = engine
        self.box = box or SecretBox()
        # No configured key: secrets are sealed with this process's own, which dies with it.
        self._opener = self.box if self.box.sealing else SecretBox(AESGCM.generate_key(bit_length=256))

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
                            f"(method, path, body or {_HEADER_NAMES} differ); use a new key",
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
                    try:
                        body = self._opener.open(str(row["body"]), seal_context(account_id, environment, key))
                    except SealingKeyError:
                        log.warning(
                            "a stored idempotent response does not open with this edge's key; running "
                            "the request again (deduplicated downstream)",
                            extra={"account_id": account_id},
                        )
                        await conn.execute(
                            sa.update(records)
                            .where(where)
                            .values(state="running", claimed_at=now, status_code=None, body=None)
                        )
                        return None
                    return Stored(int(row["status_code"]), body, json.loads(row["headers"] or "{}"))
            except IntegrityError:
                continue  # another process inserted first: read its row
        raise EdgeError("could not claim the Idempotency-Key; retry", type="idempotency_key_in_use")

    async def complete(
        self, account_id: str, environment: str, key: str, status: int, body: str, headers: dict[str, str]
    ) -> None:
        box = self._opener if self.box.sealing or contains_secret(body) else self.box
        sealed = box.seal(body, seal_context(account_id, environment, key))
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.update(records)
                .where(self._where(account_id, environment, key))
                .values(state="done", status_code=status, body=sealed, headers=json.dumps(headers))
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
