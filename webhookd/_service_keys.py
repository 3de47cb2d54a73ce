"""webhookd's ListSigningKeys: the public halves of the ed25519 keys (``_ed25519``) that sign an account's
Standard Webhooks deliveries. ``WebhookService`` inherits it."""

from __future__ import annotations

import grpc

from svckit.clock import Clock
from svckit.protos import timestamp as ts
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._ed25519 import public_key
from webhookd._errors import NotFound
from webhookd._repository import EndpointRecord, Repository

PAGE = 500


class SigningKeyReads:
    repo: Repository
    clock: Clock

    async def _scope_endpoints(self, request: pb.ListSigningKeysRequest) -> list[EndpointRecord]:
        account_id, env = cv.scope(request)
        if request.endpoint_id:
            endpoint_id = cv.identifier(request.endpoint_id, "endpoint_id")
            found = await self.repo.get_endpoint(account_id, env, endpoint_id)
            if found is None:
                raise NotFound(f"endpoint_id: no endpoint {endpoint_id} in this account and environment")
            return [found]
        out: list[EndpointRecord] = []
        after = None
        while True:
            page = await self.repo.list_endpoints(account_id, env, PAGE, after)
            out.extend(page)
            if len(page) < PAGE:
                return out
            after = (page[-1].created_at, page[-1].id)

    async def ListSigningKeys(
        self, request: pb.ListSigningKeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSigningKeysResponse:
        now = self.clock.now()
        keys = [
            pb.SigningKey(endpoint_id=e.id, public_key=public_key(s.signing_key), expires_at=ts(s.expires_at))
            for e in await self._scope_endpoints(request)
            for s in e.valid_signing_keys(now)
        ]
        return pb.ListSigningKeysResponse(keys=keys)
