"""WebhookService's certification probes (SendCertificationProbes): the probe deliveries of
``webhookd._probes`` sent now to each enabled sandbox endpoint of the account, through the same sender
as every delivery (its connections pass the SSRF guard), one after another in the order built, and each
answer returned. Nothing is stored: a probe is never retried and never appears among deliveries."""

from __future__ import annotations

import datetime as dt

import grpc
from google.protobuf import duration_pb2

from svckit.clock import Clock
from svckit.ids import sortable_id
from svckit.webhook_status import EndpointStatus
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._destinations import Destinations
from webhookd._probes import probe_deliveries
from webhookd._repository import Repository

PAGE = 100
# Endpoints probed per call (an account has few; the bound keeps one call's work small).
MAX_ENDPOINTS = 20


class ProbeRpcs:
    repo: Repository
    destinations: Destinations
    clock: Clock

    def _probe_id(self, prefix: str) -> str:
        return sortable_id(prefix, self.clock.now())

    async def SendCertificationProbes(
        self, request: pb.SendCertificationProbesRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendCertificationProbesResponse:
        account_id = cv.identifier(request.account_id, "account_id", "acct")
        endpoints = [
            e
            for e in await self.repo.list_endpoints(account_id, "sandbox", PAGE, None)
            if e.status == EndpointStatus.ENABLED
        ][:MAX_ENDPOINTS]
        results = []
        for endpoint in endpoints:
            now = self.clock.now()
            probes = probe_deliveries(
                endpoint_id=endpoint.id,
                account_id=account_id,
                scheme=endpoint.signature_scheme,
                secrets=endpoint.valid_secrets(now),
                now=now,
                new_id=self._probe_id,
            )
            for probe in probes:
                assert probe.signed_at is not None
                # The HTTP sender of every delivery (WebhookService keeps it in its destinations).
                sent = await self.destinations.sender.send(
                    endpoint.url,
                    probe.body,
                    list(probe.secrets),
                    probe.event_id,
                    probe.signed_at,
                    probe.scheme,
                )
                latency = duration_pb2.Duration()
                latency.FromTimedelta(dt.timedelta(milliseconds=sent.latency_ms))
                results.append(
                    pb.CertificationProbeResult(
                        delivery_id=probe.delivery_id,
                        endpoint_id=endpoint.id,
                        kind=probe.kind.value,
                        scheme=probe.scheme.value,
                        status=sent.status,
                        latency=latency,
                    )
                )
        return pb.SendCertificationProbesResponse(results=results)
