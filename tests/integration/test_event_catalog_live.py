"""Real servers publish what the event catalog says: authsvc's outbox relays apikey.revoked and
search_quota.threshold to a real webhookd (gRPC PublishEvent), and the envelopes webhookd stores and
delivers validate against svckit.catalog's schemas. The threshold event equals the sandbox's sample for
the same allowance; the edge's publisher sends every sandbox sample through the same webhookd, and
webhookd's own test send (webhook.test) fits its entry too."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from authsvc.testing import ACTOR, new_account, new_key, running_authsvc
from edge import samples
from edge.environments import Environment
from edge.publisher import Publisher
from svckit import catalog
from svckit.catalog import EVENT_KINDS
from svckit.clients import HooksClient
from svckit.events import mode_refusal
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server


def check_envelope(envelope_json: str, kind: str) -> dict[str, Any]:
    """The stored envelope, parsed, after validating it whole against the catalog's schema of ``kind``."""
    envelope: dict[str, Any] = json.loads(envelope_json)
    validator = Draft202012Validator(catalog.envelope_schema(kind), format_checker=FormatChecker())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(envelope)]
    assert not errors, (kind, envelope, errors)
    return envelope


@pytest.fixture
async def webhookd(tmp_path: pathlib.Path) -> AsyncIterator[Webhookd]:
    config = Config(
        database=f"sqlite+aiosqlite:///{tmp_path / 'wh.db'}",
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True, allow_http=True),
    )
    app = await run_server(config, start_worker=False)
    yield app
    await app.stop(0)


async def stored_events(
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    account_id: str,
    env: wpb.Environment.ValueType,
    n: int,
    within: float = 20,
) -> list[wpb.Event]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        resp = await hooks.ListEvents(wpb.ListEventsRequest(account_id=account_id, environment=env))
        if len(resp.events) >= n:
            return list(reversed(resp.events))  # oldest first
        assert asyncio.get_running_loop().time() < deadline, [e.type for e in resp.events]
        await asyncio.sleep(0.05)


async def test_authsvc_publishes_catalog_shaped_events_to_webhookd(db_url: str, webhookd: Webhookd) -> None:
    allowance = 2
    async with (
        running_authsvc(db_url, webhookd=f"127.0.0.1:{webhookd.port}") as (_server, auth),
        grpc.aio.insecure_channel(f"127.0.0.1:{webhookd.port}") as channel,
    ):
        hooks = webhooks_pb2_grpc.WebhookServiceStub(channel)
        account = await new_account(auth, allowance=allowance)
        key = (await new_key(auth, account.id, name="checkout")).key
        await auth.RevokeKey(pb.RevokeKeyRequest(key_id=key.id, reason="leaked", actor=ACTOR))
        await auth.ConsumeSearch(
            pb.ConsumeSearchRequest(account_id=account.id, environment=pb.ENVIRONMENT_LIVE, count=1)
        )
        await auth.ConsumeSearch(
            pb.ConsumeSearchRequest(account_id=account.id, environment=pb.ENVIRONMENT_LIVE, count=1)
        )
        today = dt.datetime.now(dt.UTC).date()
        events = await stored_events(hooks, account.id, wpb.ENVIRONMENT_LIVE, 2)
        assert sorted(e.type for e in events) == ["apikey.revoked", "search_quota.threshold"]
        by_kind = {e.type: check_envelope(e.envelope_json, e.type) for e in events}

        revoked = by_kind["apikey.revoked"]
        assert revoked["state"] == "revoked" and revoked["livemode"] is True
        assert revoked["account"] == account.id
        assert revoked["data"]["keyId"] == key.id and revoked["data"]["revokedBy"] == ACTOR.user
        assert revoked["data"]["reason"] == "leaked" and revoked["data"]["name"] == "checkout"

        threshold = by_kind["search_quota.threshold"]
        assert threshold["state"] == "threshold_reached" == samples.STATES["search_quota.threshold"]
        # The sandbox's sample (POST /v1/sandbox/events, the search_quota_exhausted trigger) is the same.
        assert threshold["data"] == samples.quota_threshold(
            allowance, dt.date.fromisoformat(threshold["data"]["date"])
        )
        assert threshold["data"]["date"] in {today.isoformat(), dt.datetime.now(dt.UTC).date().isoformat()}
        assert threshold["data"]["thresholdPercent"] == 80 and threshold["data"]["searchesUsed"] == 2


async def test_sandbox_samples_and_test_send_stored_by_webhookd_fit_the_catalog(webhookd: Webhookd) -> None:
    now = dt.datetime.now(dt.UTC)
    async with HooksClient(f"127.0.0.1:{webhookd.port}", None) as client:
        publisher = Publisher(client)
        for mode in ("A", "B"):
            account = f"acct_mode{mode}"
            for kind in EVENT_KINDS:
                if mode_refusal(kind, mode):
                    continue
                state, data = samples.sample(kind, mode, now, 1000)
                resp = await publisher.publish(
                    account, Environment.SANDBOX, kind, state, data, key=f"{mode}:{kind}"
                )
                envelope = check_envelope(resp.event.envelope_json, kind)
                assert envelope["livemode"] is False and envelope["data"] == data
            stored = await stored_events(
                webhooks_pb2_grpc.WebhookServiceStub(client.channel),
                account,
                wpb.ENVIRONMENT_SANDBOX,
                sum(not mode_refusal(k, mode) for k in EVENT_KINDS),
            )
            for event in stored:
                check_envelope(event.envelope_json, event.type)

        registered = await client.register_endpoint(
            wpb.RegisterEndpointRequest(
                account_id="acct_modeA",
                environment=wpb.ENVIRONMENT_SANDBOX,
                url="http://127.0.0.1:9/hook",
                events=["booking.confirmed"],
            )
        )
        sent = await client.send_test_event(
            wpb.SendTestEventRequest(
                account_id="acct_modeA",
                environment=wpb.ENVIRONMENT_SANDBOX,
                endpoint_id=registered.endpoint.id,
            )
        )
        envelope = check_envelope(sent.event.envelope_json, "webhook.test")
        assert envelope["data"] == catalog.webhook_test(registered.endpoint.id)
