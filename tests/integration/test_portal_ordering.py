"""The portal's endpoint form sets the delivery order (docs/webhooks.md "Ordered delivery") over real HTTP:
chosen on creation, shown on the endpoint's page, changed by an edit (audited before and after), a word
the form does not offer refused beside its field."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import re

from tests.integration.portal_stack import Stack, receiver, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from webhookd.testing import Receiver


async def test_the_endpoint_form_sets_and_changes_the_delivery_order(
    stack: Stack, receiver: Receiver
) -> None:
    dev = await stack.join("dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    listing = (await dev.get("/sandbox/webhooks")).text
    assert 'name="ordering" value="none" checked' in listing  # the default, preselected
    token = csrf_of(listing)
    form = {"csrf": token, "url": receiver.url("/h"), "events": "booking.confirmed"}
    refused = await dev.post("/sandbox/webhooks", data={**form, "ordering": "fifo"})
    assert refused.status_code == 400
    assert re.search(r'data-field="ordering">choose one of none, perResource<', refused.text)
    made = await dev.post("/sandbox/webhooks", data={**form, "ordering": "perResource"})
    assert made.status_code == 303, made.text
    endpoint_id = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)/", made.headers["location"])[1]  # type: ignore[index]
    ref = wpb.GetEndpointRequest(
        account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, endpoint_id=endpoint_id
    )
    got = await stack.hooks.GetEndpoint(ref)
    assert got.endpoint.ordering == wpb.DELIVERY_ORDER_PER_RESOURCE
    page = (await dev.get(f"/sandbox/webhooks/{endpoint_id}")).text
    assert '<dd data-testid="ordering">perResource</dd>' in page
    assert 'name="ordering" value="perResource" checked' in page

    edited = await dev.post(f"/sandbox/webhooks/{endpoint_id}/edit", data={**form, "ordering": "none"})
    assert edited.status_code == 303
    got = await stack.hooks.GetEndpoint(ref)
    assert got.endpoint.ordering == wpb.DELIVERY_ORDER_UNORDERED
    # A form without the field (an older page) leaves the order as it is.
    assert (await dev.post(f"/sandbox/webhooks/{endpoint_id}/edit", data=form)).status_code == 303
    got = await stack.hooks.GetEndpoint(ref)
    assert got.endpoint.ordering == wpb.DELIVERY_ORDER_UNORDERED

    trail = await stack.auth.ListAuditEvents(
        apb.ListAuditEventsRequest(account_id=stack.account_id, action="webhook_endpoint.updated")
    )
    changes = [(e.before["ordering"], e.after["ordering"]) for e in trail.events if "ordering" in e.after]
    assert changes == [("perResource", "none")]
    created = await stack.auth.ListAuditEvents(
        apb.ListAuditEventsRequest(account_id=stack.account_id, action="webhook_endpoint.created")
    )
    assert [e.after["ordering"] for e in created.events] == ["perResource"]
    await dev.aclose()
