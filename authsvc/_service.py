"""The travel.auth.v1.AuthService servicer: validates input, calls the repository, publishes changes."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from time import monotonic
from typing import Any

import grpc
from google.protobuf import duration_pb2

from authsvc import _convert as cv
from authsvc import _validate as v
from authsvc._cache import KeyCache
from authsvc._decision import AccessRequest, Credential, Decision, authorize, reusable
from authsvc._errors import InvalidApiKey, InvalidRequest, MissingApiKey
from authsvc._keys import environment_of, generate_secret, hash_secret, hashes_equal, hint
from authsvc._lastused import LastUsed
from authsvc._metrics import AUTHORIZE_DECISIONS, KEY_CACHE
from authsvc._model import (
    DEFAULT_DAILY_SEARCH_ALLOWANCE,
    Account,
    AccountMode,
    AccountStatus,
    Actor,
    ApiKey,
    AuditFilter,
    KeyChange,
    KeyGrant,
)
from authsvc._repository import Repository
from authsvc._watch import ChangeHub
from svckit.allowlist import parse_source, validate_allowlist
from svckit.clock import Clock, SystemClock
from svckit.ids import new_id
from svckit.logs import redact
from svckit.metrics import LoopCount
from svckit.pages import BAD_PAGE_TOKEN, BadPageToken, page_parts, page_token
from svckit.scopes import is_scope, validate_scopes
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

log = logging.getLogger(__name__)

_CACHE_HIT = KEY_CACHE.labels("hit")
_CACHE_MISS = KEY_CACHE.labels("miss")
_KEPT = KEY_CACHE.labels("kept")


@functools.cache
def _decisions(allowed: bool, error_type: str) -> Any:
    """The AUTHORIZE_DECISIONS child of one answer (a few dozen at most: error types are a fixed table)."""
    return AUTHORIZE_DECISIONS.labels("allow" if allowed else "deny", error_type)


@functools.lru_cache(maxsize=64)
def _duration(seconds: float) -> duration_pb2.Duration:
    """The cache_ttl message of a TTL (copied into each answer, never changed)."""
    return duration_pb2.Duration(seconds=int(seconds), nanos=int((seconds % 1) * 1e9))


@dataclasses.dataclass(slots=True)
class _Answer:
    """An Authorize answer: the grant it was decided for (None for no key or an unknown one), the decision
    and the response but for the key's last use; the response with the last use it last showed. A kept
    answer (``reusable``) also holds the key cache generation it was decided in, until when (monotonic)
    it may be given, and when it next records a use of the key."""

    grant: KeyGrant | None
    decision: Decision
    response: pb.AuthorizeResponse
    counted: LoopCount
    shown_use: dt.datetime | None = None
    stamped: pb.AuthorizeResponse | None = None
    generation: int = -1
    until: float = 0.0
    touch_at: float = 0.0


def _shape(request: pb.AuthorizeRequest) -> tuple[bytes, int, str, str, bool]:
    """What an Authorize answer is kept by: the key's BLAKE2b digest (never the key; BLAKE2 is Python's own,
    which under load costs half of OpenSSL's SHA-256 per call) and the other request fields."""
    return (
        hashlib.blake2b(request.api_key.encode(), digest_size=32).digest(),
        request.environment,
        request.required_scope,
        request.source_address,
        request.is_write,
    )


# Kept Authorize answers (one per key and request shape: environment, scope, source, write); past this
# many they are all dropped and rebuilt as calls come.
MAX_KEPT_ANSWERS = 10_000
# A kept answer records a use of its key at most this often (seconds); uses are remembered to the second.
TOUCH_INTERVAL = 1.0
DEFAULT_GRACE = dt.timedelta(hours=24)
MAX_GRACE = dt.timedelta(days=7)
# Shortest WatchKeyChanges heartbeat interval a watcher may ask for (seconds).
MIN_HEARTBEAT = 0.1
MODES: dict[int, AccountMode] = {pb.ACCOUNT_MODE_A: "a", pb.ACCOUNT_MODE_B: "b"}


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


def allowance_of(value: int) -> int:
    """A daily search allowance as asked for: 0 means the service default."""
    if value < 0 or value > v.MAX_ALLOWANCE:
        raise InvalidRequest(f"daily_search_allowance: must be between 0 and {v.MAX_ALLOWANCE}")
    return value or DEFAULT_DAILY_SEARCH_ALLOWANCE


def _untoken(token: str, n: int) -> list[str]:
    try:
        return page_parts(token, n)
    except BadPageToken as exc:
        raise InvalidRequest(str(exc)) from None


def _peer_address(context: grpc.aio.ServicerContext) -> str:
    peer = context.peer() or ""
    if peer.startswith("ipv4:"):
        return peer[5:].rsplit(":", 1)[0]
    if peer.startswith("ipv6:"):
        return peer[5:].rsplit(":", 1)[0].strip("[]")
    return peer[:100]


class AuthServicer(auth_pb2_grpc.AuthServiceServicer):
    def __init__(
        self,
        repo: Repository,
        hub: ChangeHub,
        *,
        clock: Clock | None = None,
        cache: KeyCache | None = None,
        last_used: LastUsed | None = None,
        outbox_wakeup: asyncio.Event | None = None,
    ) -> None:
        self.repo = repo
        self.hub = hub
        self.clock: Clock = clock or SystemClock()
        self.cache = cache or KeyCache()
        self.last_used = last_used or LastUsed(repo)
        self.outbox_wakeup = outbox_wakeup
        hub.on_change(self.cache.invalidate)
        # Authorize answers kept for reuse (decision.reusable), by request shape (_shape).
        self._answers: dict[tuple[bytes, int, str, str, bool], _Answer] = {}

    # -- helpers ---------------------------------------------------------------------------------

    def _actor(self, actor: pb.Actor, context: grpc.aio.ServicerContext) -> Actor:
        a = v.actor(actor.user, actor.source_address, actor.user_id)
        return a if a.source_address else Actor(a.user, _peer_address(context), a.user_id)

    def _changed(self, change: KeyChange) -> None:
        self.hub.publish(change)

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
        """The key for a well-formed secret: from the cache, else one indexed look-up by hash."""
        digest = hash_secret(secret)
        grant = self.cache.get(digest)
        if grant is not None:
            _CACHE_HIT.inc()
            return grant
        _CACHE_MISS.inc()
        generation = self.cache.generation
        found = await self.repo.grant_by_hash(digest)
        if found is None or not hashes_equal(found[0].secret_hash, digest):
            return None
        grant = KeyGrant.of(*found)
        self.cache.put(digest, grant, generation)
        return grant

    # -- authentication --------------------------------------------------------------------------

    async def Authenticate(
        self, request: pb.AuthenticateRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuthenticateResponse:
        if not request.api_key:
            raise MissingApiKey("api_key: no API key provided")
        if environment_of(request.api_key) is None:
            raise InvalidApiKey("Invalid API key provided.")
        grant = await self._grant(request.api_key)
        now = self.clock.now()
        if grant is None:
            raise InvalidApiKey("Invalid API key provided.")
        status = grant.key.status(now)
        if status in ("revoked", "expired"):
            raise InvalidApiKey(f"Invalid API key provided: the key was {status}.")
        self.last_used.touch(grant.key.id, now)
        return pb.AuthenticateResponse(key=self._key_pb(grant.key, now), account=cv.account(grant.account))

    async def Authorize(
        self, request: pb.AuthorizeRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuthorizeResponse:
        shape = _shape(request)
        kept = self._answers.get(shape)
        if kept is not None and kept.generation == self.cache.generation:
            t = monotonic()
            if t < kept.until:
                _KEPT.inc()
                if t < kept.touch_at:
                    kept.counted.inc()
                    return kept.stamped  # type: ignore[return-value]
                return self._reply(kept, self.clock.now(), t)
        # Read before any look-up: an answer decided across a key change must not be kept (as KeyCache.put).
        generation = self.cache.generation
        env = cv.environment(request.environment)
        if request.required_scope and not is_scope(request.required_scope):
            raise InvalidRequest(f"required_scope: unknown scope {redact(request.required_scope[:40])!r}")
        if request.source_address and parse_source(request.source_address) is None:
            raise InvalidRequest("source_address: not an IP address")
        secret = request.api_key
        grant: KeyGrant | None = None
        if not secret:
            credential = Credential.MISSING
        elif environment_of(secret) is None:
            credential = Credential.MALFORMED
        else:
            credential = Credential.WELL_FORMED
            grant = await self._grant(secret)
        now = self.clock.now()
        access = AccessRequest(
            env, request.required_scope, request.source_address, request.is_write, credential
        )
        decision: Decision = authorize(grant, access, now)
        answer = _Answer(
            grant,
            decision,
            self._response(decision, grant, now),
            _decisions(decision.allowed, decision.error_type),
        )
        if grant is not None and reusable(grant):
            if len(self._answers) >= MAX_KEPT_ANSWERS:
                self._answers.clear()
            answer.generation, answer.until = generation, monotonic() + self.cache.ttl
            self._answers[shape] = answer
        return self._reply(answer, now, monotonic())

    def _response(self, decision: Decision, grant: KeyGrant | None, now: dt.datetime) -> pb.AuthorizeResponse:
        """The answer to Authorize but the key's last use, which ``_reply`` adds."""
        out = pb.AuthorizeResponse(
            decision=pb.DECISION_ALLOW if decision.allowed else pb.DECISION_DENY,
            error_type=decision.error_type,
            error_message=decision.error_message,
            cache_ttl=_duration(decision.cache_ttl),
        )
        if grant is not None:
            out.key.CopyFrom(cv.api_key(grant.key, now))
            out.account.CopyFrom(cv.account(grant.account))
        return out

    def _reply(self, answer: _Answer, now: dt.datetime, t: float) -> pb.AuthorizeResponse:
        """``answer`` with the key's last use before this call; this call recorded as a use.

        The message returned is shared by every call that shows the same last use: nothing changes it after
        it is made, and grpc serialises it as the handler returns."""
        decision, grant = answer.decision, answer.grant
        seen = None
        if grant is not None:
            key = grant.key
            seen = self._newer_use(key)  # else the stored use, which the response already has
            if key.status(now) not in ("revoked", "expired"):
                self.last_used.touch(key.id, now)
        answer.touch_at = t + TOUCH_INTERVAL
        out = answer.stamped
        if out is None or answer.shown_use != seen:
            out = pb.AuthorizeResponse()
            out.CopyFrom(answer.response)
            if seen is not None:
                out.key.last_used_at.FromDatetime(seen)
            answer.shown_use, answer.stamped = seen, out
        answer.counted.inc()
        if not decision.allowed:
            log.debug(
                "authorize denied",
                extra={"error_type": decision.error_type, "key_id": grant.key.id if grant else ""},
            )
        return out

    # -- accounts --------------------------------------------------------------------------------

    async def CreateAccount(
        self, request: pb.CreateAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateAccountResponse:
        actor = self._actor(request.actor, context)
        name = v.text(request.name, "name", max_len=v.MAX_NAME, required=True)
        if request.mode == pb.ACCOUNT_MODE_UNSPECIFIED:
            mode: AccountMode = "a"
        elif request.mode in MODES:
            mode = MODES[request.mode]
        else:
            raise InvalidRequest("mode: must be ACCOUNT_MODE_A or ACCOUNT_MODE_B")
        emails = v.emails(list(request.admin_emails))
        allowance = allowance_of(request.daily_search_allowance)
        now = self.clock.now()
        account = Account(
            id=new_id("acct"),
            name=name,
            mode=mode,
            status="active",
            admin_emails=emails,
            daily_search_allowance=allowance,
            created_at=now,
            updated_at=now,
        )
        await self.repo.create_account(account, actor)
        log.info("account created", extra={"account_id": account.id, "actor": actor.user})
        return pb.CreateAccountResponse(account=cv.account(account))

    async def GetAccount(
        self, request: pb.GetAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAccountResponse:
        account = await self.repo.get_account(v.ident(request.account_id, "account_id", "acct"))
        return pb.GetAccountResponse(account=cv.account(account))

    async def SetAccountStatus(
        self, request: pb.SetAccountStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetAccountStatusResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        statuses: dict[int, AccountStatus] = {
            pb.ACCOUNT_STATUS_ACTIVE: "active",
            pb.ACCOUNT_STATUS_READ_ONLY: "read_only",
        }
        status = statuses.get(request.status)
        if status is None:
            raise InvalidRequest("status: must be ACCOUNT_STATUS_ACTIVE or ACCOUNT_STATUS_READ_ONLY")
        now = self.clock.now()
        account, changed = await self.repo.set_account_status(account_id, status, actor, now)
        if changed:
            self._changed(KeyChange("account_updated", "", account_id, now))
            log.info(
                "account status changed",
                extra={"account_id": account_id, "status": status, "actor": actor.user},
            )
        return pb.SetAccountStatusResponse(account=cv.account(account))

    async def UpdateAccount(
        self, request: pb.UpdateAccountRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateAccountResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        changes = masked_changes(
            request.update_mask,
            {
                "name": lambda: v.text(request.name, "name", max_len=v.MAX_NAME, required=True),
                "admin_emails": lambda: v.emails(list(request.admin_emails)),
                "daily_search_allowance": lambda: allowance_of(request.daily_search_allowance),
            },
        )
        now = self.clock.now()
        account = await self.repo.update_account(account_id, changes, actor, now)
        self._changed(KeyChange("account_updated", "", account_id, now))
        log.info(
            "account updated",
            extra={"account_id": account_id, "fields": sorted(changes), "actor": actor.user},
        )
        return pb.UpdateAccountResponse(account=cv.account(account))

    # -- keys ------------------------------------------------------------------------------------

    async def CreateKey(
        self, request: pb.CreateKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateKeyResponse:
        actor = self._actor(request.actor, context)
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = cv.environment(request.environment)
        name = v.text(request.name, "name", max_len=v.MAX_NAME)
        scopes = validate_scopes(request.scopes)
        sources = validate_allowlist(request.allowed_sources)
        rate_limit = v.rate_limit(request.rate_limit)
        now = self.clock.now()
        secret = generate_secret(env)
        key = ApiKey(
            id=new_id("key"),
            account_id=account_id,
            environment=env,
            name=name,
            scopes=scopes,
            allowed_sources=sources,
            hint=hint(secret),
            secret_hash=hash_secret(secret),
            created_at=now,
            rate_limit=rate_limit,
        )
        await self.repo.create_key(key, actor)
        log.info("key created", extra={"key_id": key.id, "account_id": account_id, "actor": actor.user})
        return pb.CreateKeyResponse(key=self._key_pb(key, now), secret=secret)

    async def GetKey(self, request: pb.GetKeyRequest, context: grpc.aio.ServicerContext) -> pb.GetKeyResponse:
        key = await self.repo.get_key(v.ident(request.key_id, "key_id", "key"))
        return pb.GetKeyResponse(key=self._key_pb(key, self.clock.now()))

    async def ListKeys(
        self, request: pb.ListKeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListKeysResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = (
            None if request.environment == pb.ENVIRONMENT_UNSPECIFIED else cv.environment(request.environment)
        )
        size = v.page_size(request.page_size)
        after: tuple[float, str] | None = None
        if request.page_token:
            created, key_id = _untoken(request.page_token, 2)
            try:
                after = (float(created), key_id)
            except ValueError:
                raise InvalidRequest(BAD_PAGE_TOKEN) from None
        rows = await self.repo.list_keys(account_id, env, request.include_revoked, size + 1, after)
        now = self.clock.now()
        out = pb.ListKeysResponse(keys=[self._key_pb(k, now) for k in rows[:size]])
        if len(rows) > size:
            last = rows[size - 1]
            out.next_page_token = page_token(repr(last.created_at.timestamp()), last.id)
        return out

    async def UpdateKey(
        self, request: pb.UpdateKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateKeyResponse:
        actor = self._actor(request.actor, context)
        key_id = v.ident(request.key_id, "key_id", "key")
        changes = masked_changes(
            request.update_mask,
            {
                "name": lambda: v.text(request.name, "name", max_len=v.MAX_NAME),
                "scopes": lambda: validate_scopes(request.scopes),
                "allowed_sources": lambda: validate_allowlist(request.allowed_sources),
                "rate_limit": lambda: v.rate_limit(request.rate_limit),
            },
        )
        now = self.clock.now()
        key = await self.repo.update_key(key_id, changes, actor, now)
        self._changed(KeyChange("updated", key_id, key.account_id, now))
        log.info("key updated", extra={"key_id": key_id, "fields": sorted(changes), "actor": actor.user})
        return pb.UpdateKeyResponse(key=self._key_pb(key, now))

    async def RotateKey(
        self, request: pb.RotateKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.RotateKeyResponse:
        actor = self._actor(request.actor, context)
        key_id = v.ident(request.key_id, "key_id", "key")
        grace = DEFAULT_GRACE
        if request.HasField("grace_period"):
            grace = request.grace_period.ToTimedelta()
            if grace < dt.timedelta(0) or grace > MAX_GRACE:
                raise InvalidRequest("grace_period: must be between 0 and 7 days")
        now = self.clock.now()
        secret_box: list[str] = []

        def successor(old: ApiKey) -> ApiKey:
            secret = generate_secret(old.environment)
            secret_box.append(secret)
            return ApiKey(
                id=new_id("key"),
                account_id=old.account_id,
                environment=old.environment,
                name=old.name,
                scopes=old.scopes,
                allowed_sources=old.allowed_sources,
                hint=hint(secret),
                secret_hash=hash_secret(secret),
                created_at=now,
                rotated_from_key_id=old.id,
                rate_limit=old.rate_limit,
            )

        new, old = await self.repo.rotate_key(key_id, successor, now + grace, actor, now)
        self._changed(KeyChange("rotated", key_id, old.account_id, now))
        log.info(
            "key rotated",
            extra={
                "key_id": key_id,
                "new_key_id": new.id,
                "actor": actor.user,
                "grace_seconds": grace.total_seconds(),
            },
        )
        return pb.RotateKeyResponse(
            new_key=self._key_pb(new, now), secret=secret_box[-1], old_key=self._key_pb(old, now)
        )

    async def RevokeKey(
        self, request: pb.RevokeKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeKeyResponse:
        actor = self._actor(request.actor, context)
        key_id = v.ident(request.key_id, "key_id", "key")
        reason = v.text(request.reason, "reason", max_len=v.MAX_REASON)
        now = self.clock.now()
        key, changed = await self.repo.revoke_key(key_id, reason, actor, now, new_id("obx"))
        if changed:
            self._changed(KeyChange("revoked", key_id, key.account_id, now))
            if self.outbox_wakeup is not None:
                self.outbox_wakeup.set()
            log.info(
                "key revoked", extra={"key_id": key_id, "account_id": key.account_id, "actor": actor.user}
            )
        return pb.RevokeKeyResponse(key=self._key_pb(key, now))

    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAuditEventsResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        key_id = v.ident(request.key_id, "key_id", "key") if request.key_id else ""
        size = v.page_size(request.page_size)
        after = 0
        if request.page_token:
            (seq,) = _untoken(request.page_token, 1)
            if not seq.isdigit():
                raise InvalidRequest(BAD_PAGE_TOKEN)
            after = int(seq)
        filters = AuditFilter(
            actor_user_id=v.ident(request.actor_user_id, "actor_user_id", "usr")
            if request.actor_user_id
            else "",
            action=v.text(request.action, "action", max_len=64),
            since=request.since.ToDatetime(dt.UTC) if request.HasField("since") else None,
            until=request.until.ToDatetime(dt.UTC) if request.HasField("until") else None,
        )
        rows = await self.repo.list_audit(account_id, key_id, size + 1, after, filters)
        out = pb.ListAuditEventsResponse(events=[cv.audit_event(e) for _, e in rows[:size]])
        if len(rows) > size:
            out.next_page_token = page_token(rows[size - 1][0])
        return out

    async def WatchKeyChanges(
        self, request: pb.WatchKeyChangesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchKeyChangesResponse]:
        account_id = v.ident(request.account_id, "account_id", "acct") if request.account_id else ""
        heartbeat = (
            max(request.heartbeat_interval.ToTimedelta().total_seconds(), MIN_HEARTBEAT)
            if request.HasField("heartbeat_interval")
            else None
        )
        async with self.hub.subscribe() as queue:
            yield cv.change(KeyChange("sync", "", account_id, self.clock.now()))
            while True:
                try:
                    change = await asyncio.wait_for(queue.get(), heartbeat)
                except TimeoutError:
                    yield pb.WatchKeyChangesResponse(
                        kind=pb.KEY_CHANGE_KIND_HEARTBEAT, changed_at=cv.ts(self.clock.now())
                    )
                    continue
                if change is None:
                    return
                if account_id and change.kind != "sync" and change.account_id != account_id:
                    continue
                yield cv.change(change)

    # -- travellers ------------------------------------------------------------------------------

    async def ResolveTraveller(
        self, request: pb.ResolveTravellerRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResolveTravellerResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = cv.environment(request.environment)
        ref = v.partner_ref(request.partner_ref)
        trv, created = await self.repo.resolve_traveller(account_id, env, ref, self.clock.now())
        return pb.ResolveTravellerResponse(traveller_id=trv, created=created)

    async def DeleteTraveller(
        self, request: pb.DeleteTravellerRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTravellerResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        env = cv.environment(request.environment)
        ref = v.partner_ref(request.partner_ref)
        trv = await self.repo.delete_traveller(account_id, env, ref)
        log.info("traveller deleted", extra={"account_id": account_id, "traveller_id": trv})
        return pb.DeleteTravellerResponse(traveller_id=trv)

    # -- search allowance ------------------------------------------------------------------------

    async def ConsumeSearch(
        self, request: pb.ConsumeSearchRequest, context: grpc.aio.ServicerContext
    ) -> pb.ConsumeSearchResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        if request.key_id:
            key = await self.repo.get_key(v.ident(request.key_id, "key_id", "key"))
            if key.account_id != account_id:
                raise InvalidRequest("key_id: the key belongs to another account")
            env = key.environment
            if (
                request.environment != pb.ENVIRONMENT_UNSPECIFIED
                and cv.environment(request.environment) != env
            ):
                raise InvalidRequest("environment: differs from the key's environment")
        else:
            env = cv.environment(request.environment)
        count = request.count or 1
        if count < 1 or count > v.MAX_SEARCH_COUNT:
            raise InvalidRequest(f"count: must be between 1 and {v.MAX_SEARCH_COUNT}")
        now = self.clock.now()
        day = v.day("", now)
        if env == "sandbox":
            return pb.ConsumeSearchResponse(
                counted=False, usage=cv.usage(await self.repo.get_usage(account_id, day))
            )
        used = await self.repo.consume_search(account_id, env, day, count, now)
        if self.outbox_wakeup is not None:
            self.outbox_wakeup.set()  # a threshold event may have been queued
        return pb.ConsumeSearchResponse(counted=True, usage=cv.usage(used))

    async def GetUsage(
        self, request: pb.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetUsageResponse:
        account_id = v.ident(request.account_id, "account_id", "acct")
        day = v.day(request.date, self.clock.now())
        return pb.GetUsageResponse(usage=cv.usage(await self.repo.get_usage(account_id, day)))
