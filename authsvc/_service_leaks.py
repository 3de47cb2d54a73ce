"""AuthService's RevokeLeakedKeys: secrets found in public, named by their SHA-256, revoked at once.

The edge's secret-scanning routes (GitHub's partner program, GitLab's token revocation) call it once per
reported batch. The rule (what dies, what is left as it is) is ``authsvc._leak_rules``; the batch is one
transaction (``authsvc._sql_leaks``): revocation, audit, apikey.revoked and apikey.leaked outbox rows.
The account's people are e-mailed by webhookd when apikey.leaked reaches it (webhookd._leak_alerts).
"""

from __future__ import annotations

import logging
import re

import grpc

from authsvc import _validate as v
from authsvc._errors import InvalidRequest, NotFound
from authsvc._leak_rules import MAX_SOURCE, MAX_URL, Leak, clip
from authsvc._model import Actor, KeyChange
from authsvc._service_base import ServicerBase, peer_address
from svckit.ids import new_id
from svckit.prototables import AUTH_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

MAX_LEAKED_TOKENS = 1000
SELF_REASON = "revoked by itself"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class LeakRpcs(ServicerBase):
    async def RevokeLeakedKeys(
        self, request: pb.RevokeLeakedKeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeLeakedKeysResponse:
        actor = self._actor(request.actor, context)
        if len(request.tokens) > MAX_LEAKED_TOKENS:
            raise InvalidRequest(f"tokens: at most {MAX_LEAKED_TOKENS} a call, got {len(request.tokens)}")
        leaks: list[Leak] = []
        for i, token in enumerate(request.tokens):
            if not _SHA256_HEX.fullmatch(token.token_hash):
                raise InvalidRequest(f"tokens[{i}].token_hash: must be 64 lower-case hex digits (SHA-256)")
            leaks.append(Leak(token.token_hash, clip(token.url, MAX_URL), clip(token.source, MAX_SOURCE)))
        reporter = v.text(request.reporter, "reporter", max_len=80, required=True)
        now = self.clock.now()
        outcomes = await self.repo.revoke_leaked(leaks, reporter, actor, now, lambda: new_id("obx"))
        revoked = [o for o in outcomes if o.revoked_now]
        for o in revoked:
            self._changed(KeyChange("revoked", o.key.id, o.key.account_id, now))
        if revoked:
            if self.outbox_wakeup is not None:
                self.outbox_wakeup.set()
            log.warning(
                "leaked keys revoked",
                extra={"keys": [o.key.id for o in revoked], "reporter": reporter, "actor": actor.user},
            )
        return pb.RevokeLeakedKeysResponse(
            keys=[
                pb.LeakedKey(
                    token_hash=o.token_hash,
                    key_id=o.key.id,
                    account_id=o.key.account_id,
                    environment=AUTH_ENVIRONMENT.pb(o.key.environment),
                    revoked_now=o.revoked_now,
                )
                for o in outcomes
            ]
        )

    async def RevokeOwnKey(
        self, request: pb.RevokeOwnKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeOwnKeyResponse:
        """The key whose secret hashes to ``token_hash`` revoked, audited as acting for itself."""
        if not _SHA256_HEX.fullmatch(request.token_hash):
            raise InvalidRequest("token_hash: must be 64 lower-case hex digits (SHA-256)")
        found = await self.repo.grant_by_hash(request.token_hash)
        if found is None:
            raise NotFound("token_hash: no such key")
        key = found[0]
        actor = Actor(f"key:{key.id}", request.source_address[: v.MAX_SOURCE] or peer_address(context))
        now = self.clock.now()
        revoked, changed = await self.repo.revoke_key(key.id, SELF_REASON, actor, now, new_id("obx"))
        if changed:
            self._changed(KeyChange("revoked", key.id, key.account_id, now))
            if self.outbox_wakeup is not None:
                self.outbox_wakeup.set()
            log.info("key revoked by itself", extra={"key_id": key.id, "account_id": key.account_id})
        return pb.RevokeOwnKeyResponse(key=self._key_pb(revoked, now))
