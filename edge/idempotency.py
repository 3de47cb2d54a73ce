"""Idempotency records (decisions.md "Idempotency"), shared by every edge process through the database.

A POST's Idempotency-Key is scoped to account + environment and kept 24 h. The first request claims
the key (state ``running``); its response, unless a 5xx, is stored (state ``done``) and replayed to a
repeat of the same request. "The same request" is its fingerprint (``request_hash``): method, path,
body, and every request header that changes what the request means (``FINGERPRINT_HEADERS``). A
different request under the same key is idempotency_key_reused (422); a repeat while the first still
runs is idempotency_key_in_use (409). A claim names its owner (this store's process) and carries a
heartbeat the owner refreshes while the request runs, so the claim of an edge that died is taken over
within seconds (``edge.idempotency_claims``, the rule); a completion or release only touches a claim the
store still owns.

Stored bodies can hold secrets (a new endpoint's signing secret), so they are sealed at rest with
AES-256-GCM (``svckit.secretbox``) under the edge's idempotency key, the record's account, environment
and key as associated data. Without a configured key, bodies holding anything secret-shaped are sealed
with a random key of this process (other bodies stay plain, so processes sharing the database still
replay them). A sealed body that does not open (another process's or another key) is not replayed: the
record is taken over and the request runs again, deduplicated downstream (the Idempotency-Key is passed
to webhookd and the product upstreams).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from edge.exceptions import EdgeError
from edge.idempotency_claims import (
    HEARTBEAT_SECONDS,
    RETENTION_SECONDS,
    TAKEOVER_SECONDS,
    Record,
    Verdict,
    retry_after,
    verdict,
)
from edge.migrations import SCHEMA
from svckit.db import account_columns
from svckit.freetext import contains_secret
from svckit.migrations import upgrade
from svckit.secretbox import SealingKeyError, SecretBox

log = logging.getLogger(__name__)

__all__ = [
    "HEARTBEAT_SECONDS",
    "HOLD_SECONDS",
    "RETENTION_SECONDS",
    "STALE_CLAIM_SECONDS",
    "TAKEOVER_SECONDS",
]

# A claim whose owner has not refreshed it for this long belongs to a process that died mid-request.
STALE_CLAIM_SECONDS = TAKEOVER_SECONDS
# How long a request finding its key in use waits for the first to end or be taken over, before the
# 409: just past the takeover bound, so a retry sent at once after an edge died runs; looked at twice a
# second meanwhile.
HOLD_SECONDS = TAKEOVER_SECONDS + 1
HOLD_POLL_SECONDS = 0.5

metadata = sa.MetaData()
records = sa.Table(
    "edge_idempotency",
    metadata,
    *account_columns(primary_key=True),
    sa.Column("idem_key", sa.String(255), primary_key=True),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("body", sa.Text, nullable=True),
    sa.Column("headers", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("claimed_at", sa.Float, nullable=False),
    # The edge process running the claim, and when it last said so (revision 0002; NULL: an older
    # release's claim, or a stored answer).
    sa.Column("owner", sa.String(40), nullable=True),
    sa.Column("heartbeat_at", sa.Float, nullable=True),
    sa.Index("edge_idempotency_created", "created_at"),
)

Key = tuple[str, str, str]  # account, environment, Idempotency-Key


def _record(row: Mapping[Any, Any]) -> Record:
    return Record(
        row["request_hash"],
        row["state"],
        row["created_at"],
        row["claimed_at"],
        row["owner"],
        row["heartbeat_at"],
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


def _same(column: sa.Column[Any], value: object) -> sa.ColumnElement[bool]:
    return column.is_(None) if value is None else column == value


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


class _InUse(Exception):
    def __init__(self, record: Record) -> None:
        self.record = record


class SqlIdempotencyStore:
    def __init__(
        self,
        engine: AsyncEngine,
        box: SecretBox | None = None,
        *,
        clock: Callable[[], float] = time.time,
        hold: float = HOLD_SECONDS,
    ) -> None:
        self.engine = engine
        self.hold = hold
        self.box = box or SecretBox()
        # No configured key: secrets are sealed with this process's own, which dies with it.
        self._opener = self.box if self.box.sealing else SecretBox(AESGCM.generate_key(bit_length=256))
        self.owner = "edge_" + uuid.uuid4().hex[:20]
        self._clock = clock  # the heartbeat's time (claims take the caller's ``now``)
        self._held: dict[Key, float] = {}  # claims this store runs -> when it last refreshed them
        self._beater: asyncio.Task[None] | None = None

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
        """A key in use is looked at again every ``HOLD_POLL_SECONDS`` for up to ``hold`` seconds before
        the 409: the first request may end meanwhile (its answer is replayed) or prove dead (taken over),
        so a partner's one retry after an edge died mid-request gets an answer, not a 409."""
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            try:
                return await self._claim(account_id, environment, key, req_hash, now + elapsed)
            except _InUse as busy:
                if elapsed + HOLD_POLL_SECONDS > self.hold:
                    raise EdgeError(
                        "a request with this Idempotency-Key is still being processed; retry in "
                        f"{retry_after(busy.record, now + elapsed)} s with the same key",
                        type="idempotency_key_in_use",
                    ) from None
            await asyncio.sleep(HOLD_POLL_SECONDS)

    async def _claim(
        self, account_id: str, environment: str, key: str, req_hash: str, now: float
    ) -> Stored | None:
        where = self._where(account_id, environment, key)
        mine = {"owner": self.owner, "heartbeat_at": now, "claimed_at": now}
        for _ in range(3):
            try:
                async with self.engine.begin() as conn:
                    query = sa.select(records).where(where)
                    if self.engine.dialect.name == "postgresql":
                        query = query.with_for_update()
                    row = (await conn.execute(query)).mappings().first()
                    record = _record(row) if row is not None else None
                    found = verdict(record, req_hash, now)
                    if found is Verdict.EXPIRED:
                        await conn.execute(sa.delete(records).where(where))
                    if found in (Verdict.CLAIM, Verdict.EXPIRED):
                        await conn.execute(
                            sa.insert(records).values(
                                account_id=account_id,
                                environment=environment,
                                idem_key=key,
                                request_hash=req_hash,
                                state="running",
                                created_at=now,
                                **mine,
                            )
                        )
                        self._hold((account_id, environment, key))
                        return None
                    assert record is not None and row is not None
                    if found is Verdict.REUSED:
                        raise EdgeError(
                            "this Idempotency-Key was already used for a different request "
                            f"(method, path, body or {_HEADER_NAMES} differ); use a new key",
                            type="idempotency_key_reused",
                        )
                    if found is Verdict.IN_USE:
                        raise _InUse(record)
                    if found is Verdict.TAKE_OVER:
                        # Only the claim as read: another edge taking it over at the same moment wins.
                        taken = await conn.execute(
                            sa.update(records)
                            .where(
                                where,
                                records.c.state == "running",
                                records.c.claimed_at == record.claimed_at,
                                _same(records.c.owner, record.owner),
                                _same(records.c.heartbeat_at, record.heartbeat_at),
                            )
                            .values(**mine)
                        )
                        if not taken.rowcount:
                            continue
                        log.info(
                            "took over an Idempotency-Key claim whose edge stopped answering",
                            extra={"account_id": account_id, "previous_owner": record.owner or "unknown"},
                        )
                        self._hold((account_id, environment, key))
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
                            .values(state="running", status_code=None, body=None, **mine)
                        )
                        self._hold((account_id, environment, key))
                        return None
                    return Stored(int(row["status_code"]), body, json.loads(row["headers"] or "{}"))
            except IntegrityError:
                continue  # another process inserted first: read its row
        raise EdgeError("could not claim the Idempotency-Key; retry", type="idempotency_key_in_use")

    # -- the heartbeat of the claims this store runs --------------------------------------------------

    def _hold(self, key: Key) -> None:
        self._held[key] = self._clock()
        if self._beater is None:
            self._beater = asyncio.get_running_loop().create_task(self._beat(), name="idempotency-heartbeat")

    def _drop(self, key: Key) -> None:
        self._held.pop(key, None)

    async def _beat(self) -> None:
        """Refresh every claim held at least a beat, each half beat, while any is held (then end)."""
        try:
            while self._held:
                await asyncio.sleep(HEARTBEAT_SECONDS / 2)
                now = self._clock()
                due = [k for k, at in self._held.items() if now - at >= HEARTBEAT_SECONDS]
                if due:
                    await self._refresh(due, now)
        finally:
            self._beater = None

    async def _refresh(self, keys: list[Key], now: float) -> None:
        try:
            async with self.engine.begin() as conn:
                for key in keys:
                    done = await conn.execute(
                        sa.update(records)
                        .where(self._where(*key), records.c.owner == self.owner, records.c.state == "running")
                        .values(heartbeat_at=now)
                    )
                    if key in self._held:
                        self._held[key] = now
                    if not done.rowcount:  # finished meanwhile, or taken over after a stall of ours
                        self._drop(key)
        except Exception as exc:  # the database down: the next beat tries again
            log.warning("could not refresh Idempotency-Key claims", extra={"error": type(exc).__name__})

    async def close(self) -> None:
        """Stop the heartbeat (claims still held are then taken over by another edge)."""
        self._held.clear()
        if self._beater is not None:
            self._beater.cancel()
            await asyncio.gather(self._beater, return_exceptions=True)

    async def complete(
        self, account_id: str, environment: str, key: str, status: int, body: str, headers: dict[str, str]
    ) -> None:
        box = self._opener if self.box.sealing or contains_secret(body) else self.box
        sealed = box.seal(body, seal_context(account_id, environment, key))
        self._drop((account_id, environment, key))
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.update(records)
                .where(self._where(account_id, environment, key), records.c.owner == self.owner)
                .values(
                    state="done",
                    status_code=status,
                    body=sealed,
                    headers=json.dumps(headers),
                    heartbeat_at=None,
                )
            )

    async def release(self, account_id: str, environment: str, key: str) -> None:
        self._drop((account_id, environment, key))
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.delete(records).where(
                    self._where(account_id, environment, key),
                    records.c.state == "running",
                    records.c.owner == self.owner,
                )
            )

    async def purge(self, now: float) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                sa.delete(records).where(records.c.created_at + RETENTION_SECONDS <= now)
            )
            return int(result.rowcount or 0)
