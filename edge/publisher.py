"""Events the edge itself publishes (the sandbox's triggers, sample events and simulator) go to webhookd's
PublishEvent over gRPC, the path every internal service uses: stored, signed, retried, logged, streamed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from edge.environments import Environment
from edge.metrics import SANDBOX_EVENTS
from svckit.clients import HooksClient, request_id_context
from svckit.prototables import HOOKS_ENVIRONMENT
from travel.webhooks.v1 import webhooks_pb2


class Publisher:
    def __init__(self, hooks: HooksClient) -> None:
        self.hooks = hooks

    async def publish(
        self,
        account_id: str,
        environment: Environment,
        kind: str,
        state: str,
        data: Mapping[str, Any],
        *,
        key: str = "",
        request_id: str = "",
    ) -> webhooks_pb2.PublishEventResponse:
        """``key``: a retried publish with the same key returns the first event instead of a new one.
        A peer's error is raised as a ``ClientError`` (the edge answers it as edge.exceptions.edge_error)."""
        payload = struct_pb2.Struct()
        payload.update(dict(data))
        with request_id_context(request_id):
            resp = await self.hooks.publish_event(
                webhooks_pb2.PublishEventRequest(
                    account_id=account_id,
                    environment=HOOKS_ENVIRONMENT.pb(environment),
                    type=kind,
                    state=state,
                    data=payload,
                    idempotency_key=key,
                )
            )
        SANDBOX_EVENTS.labels(kind).inc()
        return resp
