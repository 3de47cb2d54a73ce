"""The endpoint page's "Receiver authentication" section over real HTTP: OAuth2 credentials and headers
set by its form, shown without the client secret, kept when the secret field is left empty, a header of
ours refused beside the form, removed by an empty form; the audit trail records the public parts only."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import json
import re

from tests.integration.portal_stack import Stack, receiver, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from webhookd.testing import Receiver

SECRET = "cs_portal-" + "W4" * 10


async def test_the_receiver_auth_form(stack: Stack, receiver: Receiver) -> None:
    dev = await stack.join("dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    token = csrf_of((await dev.get("/sandbox/webhooks")).text)
    made = await dev.post(
        "/sandbox/webhooks", data={"csrf": token, "url": receiver.url("/h"), "events": "booking.confirmed"}
    )
    endpoint_id = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)/", made.headers["location"])[1]  # type: ignore[index]
    page = (await dev.get(f"/sandbox/webhooks/{endpoint_id}")).text
    assert "None: the receiver checks our signature only." in page
    action = f"/sandbox/webhooks/{endpoint_id}/receiver-auth"
    form = {
        "csrf": csrf_of(page),
        "certificate": "none",
        "token_url": receiver.url("/token"),
        "client_id": "travel-hooks",
        "client_secret": SECRET,
        "scope": "hooks",
        "headers": "X-Tenant: emea-7\n\nX-Env: test",
    }
    saved = await dev.post(action, data=form)
    assert saved.status_code == 303, saved.text
    page = (await dev.get(f"/sandbox/webhooks/{endpoint_id}")).text
    assert "client id <code>travel-hooks</code>" in page and "<code>X-Tenant: emea-7</code>" in page
    assert SECRET not in page
    ref = wpb.GetEndpointRequest(
        account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, endpoint_id=endpoint_id
    )
    got = (await stack.hooks.GetEndpoint(ref)).endpoint.receiver_auth
    assert got.oauth2.client_id == "travel-hooks" and got.oauth2.client_secret == ""
    assert dict(got.headers) == {"X-Tenant": "emea-7", "X-Env": "test"}

    # The secret left empty is kept; a header of ours is refused beside the form, nothing changes.
    kept = await dev.post(action, data={**form, "client_secret": "", "headers": "X-Tenant: emea-8"})
    assert kept.status_code == 303
    refused = await dev.post(action, data={**form, "headers": "webhook-id: x"})
    assert refused.status_code == 400
    assert re.search(r'data-field="receiver_auth.headers">header webhook-id is set by us', refused.text)
    got = (await stack.hooks.GetEndpoint(ref)).endpoint.receiver_auth
    assert dict(got.headers) == {"X-Tenant": "emea-8"} and got.oauth2.token_url == receiver.url("/token")
    removed = await dev.post(action, data={"csrf": form["csrf"], "certificate": "none"})
    assert removed.status_code == 303
    assert not (await stack.hooks.GetEndpoint(ref)).endpoint.HasField("receiver_auth")

    trail = await stack.auth.ListAuditEvents(
        apb.ListAuditEventsRequest(account_id=stack.account_id, action="webhook_endpoint.updated")
    )
    recorded = [e for e in trail.events if "receiver_auth" in e.after]
    assert len(recorded) == 3
    assert SECRET not in json.dumps([str(e) for e in trail.events])
    assert any(
        e.after["receiver_auth"]["oauth2"]["client_id"] == "travel-hooks"
        for e in recorded
        if e.after["receiver_auth"]
    )
    await dev.aclose()
