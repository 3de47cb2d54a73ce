"""Certification probes against the reference partner's receiver as a real process over HTTP: every probe
of both signature schemes (an endpoint of scheme ``both``) answered as the checks want, and each broken
variant (one flag) fails exactly its one receiver check."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import pytest
from google.protobuf import field_mask_pb2

from authsvc._certify_rules import Probe, evaluate
from svckit.ids import sortable_id
from svckit.signing import SignatureScheme, new_secret
from tests.support import ROOT
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd._probes import probe_deliveries

RECEIVER_CHECKS = {
    "receiver_accepts_valid",
    "receiver_refuses_wrong_signature",
    "receiver_refuses_stale",
    "receiver_tolerates_duplicate",
}


@asynccontextmanager
async def receiver(secret: str, *flags: str) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "examples.partner.receiver",
        "--port",
        "0",
        "--secret",
        secret,
        *flags,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("listening on "), line
        yield f"http://127.0.0.1:{int(line.split()[-1])}/webhooks"
    finally:
        proc.kill()
        await proc.wait()


async def endpoint_at_receiver(
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    account: str,
    exits: AsyncExitStack,
    events: Sequence[str] = ("booking.confirmed",),
) -> None:
    """A sandbox endpoint of ``account`` signing with both schemes, pointed at the reference receiver: a
    real process holding the endpoint's secret, stopped when ``exits`` closes."""
    endpoint = await hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=account,
            environment=wpb.ENVIRONMENT_SANDBOX,
            url="http://127.0.0.1:9/hooks",  # until the receiver is up and has its port
            events=list(events),
            signature_scheme=wpb.SIGNATURE_SCHEME_BOTH,
        )
    )
    url = await exits.enter_async_context(receiver(endpoint.signing_secret))
    await hooks.UpdateEndpoint(
        wpb.UpdateEndpointRequest(
            account_id=account,
            environment=wpb.ENVIRONMENT_SANDBOX,
            endpoint_id=endpoint.endpoint.id,
            update_mask=field_mask_pb2.FieldMask(paths=["url"]),
            url=url,
        )
    )


async def probe_results(url: str, secret: str) -> list[Probe]:
    now = dt.datetime.now(dt.UTC)
    probes = probe_deliveries(
        endpoint_id="we_1",
        account_id="acct_1",
        scheme=SignatureScheme.BOTH,
        secrets=[secret],
        now=now,
        new_id=lambda prefix: sortable_id(prefix, now),
    )
    results = []
    async with httpx.AsyncClient(timeout=10) as http:
        for p in probes:
            started = time.monotonic()
            resp = await http.post(url, content=p.body, headers=p.headers)
            latency = dt.timedelta(seconds=time.monotonic() - started)
            results.append(Probe(p.delivery_id, p.kind, p.scheme.value, resp.status_code, latency))
    return results


@pytest.mark.parametrize(
    ("flags", "failing"),
    [
        ((), set()),
        (("--accept-wrong-signature",), {"receiver_refuses_wrong_signature"}),
        (("--accept-stale-timestamp",), {"receiver_refuses_stale"}),
    ],
    ids=["reference", "accepts-wrong-signature", "accepts-stale-timestamp"],
)
async def test_probes_against_the_reference_receiver(flags: tuple[str, ...], failing: set[str]) -> None:
    secret = new_secret()
    async with receiver(secret, *flags) as url:
        results = await probe_results(url, secret)
    assert {p.scheme for p in results} == {"stripe", "standard"}
    assert len(results) == 8
    checks = [r for r in evaluate([], results, [], []) if r.name in RECEIVER_CHECKS]
    assert {r.name for r in checks if not r.passed} == failing, [r.detail for r in checks]
    for r in checks:
        if not r.passed:
            assert r.evidence and all(e.startswith("msg_") for e in r.evidence)


def test_probes_are_what_they_say() -> None:
    """Each probe, checked with the partner tool's own verifier: valid verifies, the wrong signature and
    the stale one do not (for the reason their names give), the duplicate repeats the valid event."""
    from svccli.verification import verify_delivery
    from svckit.signing import NoMatchingSignature, TimestampTooOld

    secret = new_secret()
    now = dt.datetime.now(dt.UTC)
    probes = probe_deliveries(
        endpoint_id="we_1",
        account_id="acct_1",
        scheme=SignatureScheme.STANDARD,
        secrets=[secret],
        now=now,
        new_id=lambda prefix: sortable_id(prefix, now),
    )
    valid, wrong, stale, duplicate = probes
    assert verify_delivery(valid.body, valid.headers, secret, now).event_id == valid.event_id
    with pytest.raises(NoMatchingSignature):
        verify_delivery(wrong.body, wrong.headers, secret, now)
    with pytest.raises(TimestampTooOld):
        verify_delivery(stale.body, stale.headers, secret, now)
    assert (duplicate.event_id, duplicate.body) == (valid.event_id, valid.body)
    assert duplicate.delivery_id != valid.delivery_id
    assert verify_delivery(duplicate.body, duplicate.headers, secret, now)
    assert b'"type":"webhook.test"' in valid.body
