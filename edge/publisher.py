"""Events the edge itself publishes (the sandbox's triggers, sample events and simulator) go to webhookd's
PublishEvent over gRPC, the path every internal service uses: stored, signed, retried, logged, streamed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from google.protobuf import struct_pb2

from edge.convert import WH_ENV
from edge.environments import Environment
from edge.gate import rpc_error
from edge.metrics import SANDBOX_EVENTS
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc


class Publisher:
    def __init__(self, stub: webhooks_pb2_grpc.WebhookServiceStub, timeout: float) -> None:
        self.stub = stub
        self.timeout = timeout

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
        """``key``: a retried publish with the same key returns the first event instead of a new one."""
        payload = struct_pb2.Struct()
        payload.update(dict(data))
        try:
            resp = await self.stub.PublishEvent(
                webhooks_pb2.PublishEventRequest(
                    account_id=account_id,
                    environment=WH_ENV[environment],
                    type=kind,
                    state=state,
                    data=payload,
                    idempotency_key=key,
                ),
                timeout=self.timeout,
                metadata=(("x-request-id", request_id),) if request_id else (),
            )
        except grpc.aio.AioRpcError as exc:
            raise rpc_error(exc) from None
        SANDBOX_EVENTS.labels(kind).inc()
        return resp
