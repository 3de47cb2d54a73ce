"""The operator (the svcctl certificate): every second a sandbox key made, used once at an edge, revoked,
and then tried at both edges until both refuse it: that wait is the revocation lag. Each revocation is also
a webhook (apikey.revoked) the report looks for."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from dataclasses import dataclass, field

import httpx

from svckit.clients.auth import AuthClient
from svckit.clients.errors import ClientError, PeerUnavailable
from travel.auth.v1 import auth_pb2 as pb

ACTOR = pb.Actor(user="ops:drill")
LAG_LIMIT = 15.0  # seconds a revoked key is tried for before it counts as still accepted


@dataclass
class Operator:
    clients: list[AuthClient]
    account_id: str
    http: httpx.AsyncClient
    edges: list[tuple[str, str]]
    revoked: dict[str, float] = field(default_factory=dict)  # key id -> wall time of the revocation
    # (monotonic at revocation, seconds until the last answer that still took the key: 0 when none did)
    lags: list[tuple[float, float]] = field(default_factory=list)
    took: collections.Counter[str] = field(default_factory=collections.Counter)  # edge -> keys it took
    still_accepted: list[str] = field(default_factory=list)  # key ids an edge took LAG_LIMIT s after
    unconfirmed: list[str] = field(default_factory=list)  # no 401 from an edge in LAG_LIMIT s, nor a 2xx
    errors: list[tuple[float, str]] = field(default_factory=list)
    # (monotonic, code) of each call retried on the other authsvc: the first may have committed all the same
    retried: list[tuple[float, str]] = field(default_factory=list)

    async def _either(self, n: int, request: pb.CreateKeyRequest | pb.RevokeKeyRequest) -> tuple[str, str]:
        """The call on authsvc n, retried once on the other when n is unreachable: (key id, secret)."""
        for i in (n, 1 - n):
            client = self.clients[i]
            try:
                if isinstance(request, pb.CreateKeyRequest):
                    made = await client.create_key(request, timeout=5)
                    return str(made.key.id), str(made.secret)
                return str((await client.revoke_key(request, timeout=5)).key.id), ""
            except PeerUnavailable as exc:
                if i != n:
                    raise
                self.retried.append((time.monotonic(), f"{type(request).__name__} {exc.code.name}"))
        raise AssertionError("unreachable")

    async def _status(self, edge: int, secret: str) -> int:
        try:
            url = f"{self.edges[edge][1]}/v1/account"
            resp = await self.http.get(url, headers={"Authorization": f"Bearer {secret}"}, timeout=5)
        except httpx.TransportError:
            return 0
        return resp.status_code

    async def _lag(self, key_id: str, secret: str, revoked_at: float) -> None:
        """Tries the key at both edges until both refuse it (401): an answer of 503 or a broken connection
        (an outage, a restart) neither takes nor refuses it."""
        pending, took, last = {0, 1}, 0.0, 0
        while pending and time.monotonic() - revoked_at < LAG_LIMIT:
            for edge in list(pending):
                last = await self._status(edge, secret)
                if last == 401:
                    pending.discard(edge)
                elif 200 <= last < 300:
                    took = time.monotonic() - revoked_at
                    self.took[f"edge#{edge + 1}"] += 1
            if pending:
                await asyncio.sleep(0.1)
        if pending and 200 <= last < 300:
            self.still_accepted.append(key_id)
        elif pending:
            self.unconfirmed.append(key_id)
        self.lags.append((revoked_at, took))

    async def run(self, every: float, stop: asyncio.Event) -> None:
        lags: set[asyncio.Task[None]] = set()
        for n in itertools.cycle((0, 1)):
            if stop.is_set():
                break
            started = time.monotonic()
            try:
                create = pb.CreateKeyRequest(
                    account_id=self.account_id,
                    environment=pb.ENVIRONMENT_SANDBOX,
                    name="drill",
                    scopes=["account:read"],
                    actor=ACTOR,
                )
                key_id, secret = await self._either(n, create)
                await self._status(n, secret)  # the edge now knows the key (and may have it cached)
                await self._either(n, pb.RevokeKeyRequest(key_id=key_id, reason="drill", actor=ACTOR))
                self.revoked[key_id] = time.time()
                task = asyncio.create_task(self._lag(key_id, secret, time.monotonic()))
                lags.add(task)
                task.add_done_callback(lags.discard)
            except ClientError as exc:
                self.errors.append((started, f"{exc.type} ({exc.code.name})"))
            await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
        await asyncio.gather(*lags)
