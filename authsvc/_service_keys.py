"""AuthService's key RPCs: create, get, list, update, rotate and revoke a key, the audit trail, and the
stream of key changes."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator

import grpc

from authsvc import _convert as cv
from authsvc import _validate as v
from authsvc._audit_pages import WrongOrder, audit_page_start, audit_page_token
from authsvc._errors import InvalidRequest
from authsvc._keys import generate_secret, hash_secret, hint
from authsvc._model import ApiKey, AuditFilter, KeyChange
from authsvc._service_base import ServicerBase, masked_changes
from svckit.allowlist import validate_allowlist
from svckit.ids import new_id
from svckit.pages import BAD_PAGE_TOKEN, BadPageToken, page_parts, page_token
from svckit.protos import timestamp as ts
from svckit.scopes import validate_scopes
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_GRACE = dt.timedelta(hours=24)
MAX_GRACE = dt.timedelta(days=7)
# Shortest WatchKeyChanges heartbeat interval a watcher may ask for (seconds).
MIN_HEARTBEAT = 0.1


def untoken(token: str, n: int) -> list[str]:
    try:
        return page_parts(token, n)
    except BadPageToken as exc:
        raise InvalidRequest(str(exc)) from None


class KeyRpcs(ServicerBase):
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
        self.known_keys.add(key.secret_hash)  # before the row: never a stored key this process denies
        await self.repo.create_key(key, actor)
        log.info("key created", extra={"key_id": key.id, "account_id": account_id, "actor": actor.user})
        return pb.CreateKeyResponse(key=self._key_pb(key, now), secret=secret)

    async def GetKey(self, request: pb.GetKeyRequest, context: grpc.aio.ServicerContext) -> pb.GetKeyResponse:
        key = self._owned(await self.repo.get_key(v.ident(request.key_id, "key_id", "key")))
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
            created, key_id = untoken(request.page_token, 2)
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
        await self._own_key(key_id)
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
        await self._own_key(key_id)
        grace = DEFAULT_GRACE
        if request.HasField("grace_period"):
            grace = request.grace_period.ToTimedelta()
            if grace < dt.timedelta(0) or grace > MAX_GRACE:
                raise InvalidRequest(f"grace_period: must be between 0 and {MAX_GRACE.days} days")
        now = self.clock.now()
        secret_box: list[str] = []

        def successor(old: ApiKey) -> ApiKey:
            secret = generate_secret(old.environment)
            secret_box.append(secret)
            self.known_keys.add(hash_secret(secret))  # before the row is written
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
        await self._own_key(key_id)
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
        newest_first = request.newest_first
        try:
            start = audit_page_start(request.page_token, newest_first)
        except (BadPageToken, WrongOrder) as exc:
            raise InvalidRequest(str(exc)) from None
        filters = AuditFilter(
            actor_user_id=v.ident(request.actor_user_id, "actor_user_id", "usr")
            if request.actor_user_id
            else "",
            action=v.text(request.action, "action", max_len=v.MAX_ACTION),
            since=request.since.ToDatetime(dt.UTC) if request.HasField("since") else None,
            until=request.until.ToDatetime(dt.UTC) if request.HasField("until") else None,
        )
        rows = await self.repo.list_audit(account_id, key_id, size + 1, start, filters, newest_first)
        out = pb.ListAuditEventsResponse(events=[cv.audit_event(e) for _, e in rows[:size]])
        if len(rows) > size:
            out.next_page_token = audit_page_token(rows[size - 1][0], newest_first)
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
            # Not while this process cannot hear the others' changes (authsvc._watch.ChangeHub.hearing).
            await self.hub.wait_hearing()
            yield cv.change(KeyChange("sync", "", account_id, self.clock.now()))
            while True:
                try:
                    change = await asyncio.wait_for(queue.get(), heartbeat)
                except TimeoutError:
                    if not self.hub.hearing:  # silence: the edge stops trusting its cache first
                        continue
                    yield pb.WatchKeyChangesResponse(
                        kind=pb.KEY_CHANGE_KIND_HEARTBEAT, changed_at=ts(self.clock.now())
                    )
                    continue
                if change is None:
                    return
                if account_id and change.kind != "sync" and change.account_id != account_id:
                    continue
                yield cv.change(change)
