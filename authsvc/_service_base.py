"""What every group of AuthService RPCs shares: the servicer's state and its helpers (the actor of a call,
key look-up through the cache, a key's proto with its newest use), and the update_mask check."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import grpc
from cachetools import LRUCache

from authsvc import _convert as cv
from authsvc import _validate as v
from authsvc._cache import KeyCache
from authsvc._errors import InvalidRequest, NotFound
from authsvc._keys import hash_secret, hashes_equal
from authsvc._known_keys import KnownKeys
from authsvc._lastused import LastUsed
from authsvc._metrics import KEY_CACHE
from authsvc._model import Actor, ApiKey, KeyChange, KeyGrant
from authsvc._repository import Repository
from authsvc._service_answers import MAX_KEPT_ANSWERS, Answer, Shape
from authsvc._usage_rules import RETENTION, Retention
from authsvc._watch import ChangeHub
from svckit.clock import Clock, SystemClock
from svckit.logs import redact
from svckit.peers import portal_user_var
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

_CACHE_HIT = KEY_CACHE.labels("hit")
_CACHE_MISS = KEY_CACHE.labels("miss")
_PROVEN_UNKNOWN = KEY_CACHE.labels("unknown")


def masked_changes(mask: Any, fields: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """The fields an update_mask names, each checked by its own function (``fields``: path -> check);
    an empty mask or an unknown path is invalid_request."""
    names = ", ".join(fields)
    paths = list(mask.paths)
    if not paths:
        raise InvalidRequest(f"update_mask: name at least one of {names}")
    changes: dict[str, Any] = {}
    for path in paths:
        check = fields.get(path)
        if check is None:
            raise InvalidRequest(f"update_mask: unknown path {redact(path[:40])!r}; use {names}")
        changes[path] = check()
    return changes


def peer_address(context: grpc.aio.ServicerContext) -> str:
    peer = context.peer() or ""
    if peer.startswith("ipv4:"):
        return peer[5:].rsplit(":", 1)[0]
    if peer.startswith("ipv6:"):
        return peer[5:].rsplit(":", 1)[0].strip("[]")
    return peer[: v.MAX_SOURCE]


class ServicerBase(auth_pb2_grpc.AuthServiceServicer):
    def __init__(
        self,
        repo: Repository,
        hub: ChangeHub,
        *,
        clock: Clock | None = None,
        cache: KeyCache | None = None,
        last_used: LastUsed | None = None,
        outbox_wakeup: asyncio.Event | None = None,
        known_keys: KnownKeys | None = None,
        usage_retention: Retention = RETENTION,
    ) -> None:
        self.repo = repo
        # How long each usage-count rollup is kept: which one a query may read (authsvc._usage_rules).
        self.usage_retention = usage_retention
        self.hub = hub
        self.clock: Clock = clock or SystemClock()
        self.cache = cache or KeyCache()
        self.last_used = last_used or LastUsed(repo)
        self.outbox_wakeup = outbox_wakeup
        # Keys provably absent answered without a read (authsvc._known_keys); unloaded: every key read.
        self.known_keys = KnownKeys() if known_keys is None else known_keys
        hub.on_change(self.cache.invalidate)
        # Authorize answers kept for reuse (decision.reusable), by request shape (shape_of).
        self._answers: LRUCache[Shape, Answer] = LRUCache(MAX_KEPT_ANSWERS)

    # -- helpers ---------------------------------------------------------------------------------

    def _actor(self, actor: pb.Actor, context: grpc.aio.ServicerContext) -> Actor:
        portal = portal_user_var.get()
        if portal is not None:
            # A portal call acts for the user of its session, whatever the request names.
            source = actor.source_address[: v.MAX_SOURCE] or portal.source_address
            return Actor(portal.email, source, portal.user_id)
        a = v.actor(actor.user, actor.source_address, actor.user_id)
        return a if a.source_address else Actor(a.user, peer_address(context), a.user_id)

    @staticmethod
    def _owned(key: ApiKey) -> ApiKey:
        """``key``, when a portal call may see it: only a key of its user's account (another's is
        not_found, as an unknown one)."""
        portal = portal_user_var.get()
        if portal is not None and key.account_id != portal.account_id:
            raise NotFound(f"key_id: no key {key.id!r}")
        return key

    async def _own_key(self, key_id: str) -> None:
        """Refuses a portal call naming a key of another account (``_owned``); nothing for others."""
        if portal_user_var.get() is not None:
            self._owned(await self.repo.get_key(key_id))

    def _changed(self, change: KeyChange) -> None:
        # Once: on PostgreSQL the listener hears the same change from its NOTIFY (authsvc._watch).
        self.hub.publish_once(change)

    def _newer_use(self, key: ApiKey) -> dt.datetime | None:
        """The key's last use remembered in memory when later than the stored ``last_used_at``."""
        seen = self.last_used.seen(key.id)
        if seen is not None and (key.last_used_at is None or seen > key.last_used_at):
            return seen
        return None

    def _key_pb(self, key: ApiKey, now: dt.datetime) -> pb.ApiKey:
        out = cv.api_key(key, now)
        seen = self._newer_use(key)
        if seen is not None:
            out.last_used_at.FromDatetime(seen)
        return out

    async def _grant(self, secret: str) -> KeyGrant | None:
        """The key for a well-formed secret: from the cache, else None when it is provably not stored,
        else one indexed look-up by hash."""
        digest = hash_secret(secret)
        # While another process's changes go unheard (authsvc._watch.ChangeHub.hearing) every key is read.
        hearing = self.hub.hearing
        grant = self.cache.get(digest) if hearing else None
        if grant is not None:
            _CACHE_HIT.inc()
            return grant
        if self.known_keys.unknown(digest):
            _PROVEN_UNKNOWN.inc()
            return None
        _CACHE_MISS.inc()
        generation = self.cache.generation
        found = await self.repo.grant_by_hash(digest)
        if found is None or not hashes_equal(found[0].secret_hash, digest):
            return None
        grant = KeyGrant.of(*found)
        if hearing:
            self.cache.put(digest, grant, generation)
        return grant
