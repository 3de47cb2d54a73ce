"""The portal's endpoint form sets an endpoint's destination (docs/webhooks.md "Destinations") over real
HTTP: an amqp endpoint made with its password, shown on its page and in the list without it (the form
says it is set), edited with the password left empty (kept), moved to nats and back to http; a bad broker
URL refused beside its field; the audit trail records where deliveries go, never a password."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import re
import uuid

from tests.integration.portal_stack import Stack, receiver, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from webhookd.testing import Receiver

PASSWORD = "portal-pw-" + uuid.uuid4().hex


async def test_the_endpoint_form_sets_and_changes_the_destination(stack: Stack, receiver: Receiver) -> None:
    dev = await stack.join("dest@acme.example", ipb.USER_ROLE_DEVELOPER)
    listing = (await dev.get("/sandbox/webhooks")).text
    assert 'name="type" value="http" checked' in listing  # the default, preselected
    form = {"csrf": csrf_of(listing), "events": "booking.confirmed"}
    amqp = {
        **form,
        "type": "amqp",
        "amqp_url": "amqp://svc@127.0.0.1:5672/%2F",
        "amqp_exchange": "partner.events",
        "amqp_routing_key": "bk",
    }
    refused = await dev.post("/sandbox/webhooks", data={**amqp, "amqp_url": "http://127.0.0.1/"})
    assert refused.status_code == 400
    assert re.search(r'data-field="amqp.url">must start with amqp:// or amqps://<', refused.text)
    assert 'name="type" value="amqp" checked' in refused.text  # the form comes back as it was sent
    made = await dev.post("/sandbox/webhooks", data={**amqp, "amqp_password": PASSWORD})
    assert made.status_code == 303, made.text
    endpoint_id = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)/", made.headers["location"])[1]  # type: ignore[index]
    ref = wpb.GetEndpointRequest(
        account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, endpoint_id=endpoint_id
    )
    got = (await stack.hooks.GetEndpoint(ref)).endpoint
    assert (
        got.type == wpb.DESTINATION_TYPE_AMQP
        and got.amqp.password_set
        and got.amqp.exchange == "partner.events"
    )
    page = (await dev.get(f"/sandbox/webhooks/{endpoint_id}")).text
    assert "amqp: exchange partner.events, routing key bk at amqp://svc@127.0.0.1:5672/%2F" in page
    assert "set: leave empty to keep it" in page and PASSWORD not in page
    assert "partner.events" in (await dev.get("/sandbox/webhooks")).text
    # Edited with the password left empty: kept.
    edited = await dev.post(f"/sandbox/webhooks/{endpoint_id}/edit", data={**amqp, "amqp_routing_key": "bk2"})
    assert edited.status_code == 303, edited.text
    got = (await stack.hooks.GetEndpoint(ref)).endpoint
    assert got.amqp.routing_key == "bk2" and got.amqp.password_set
    nats = {
        **form,
        "type": "nats",
        "nats_servers": "nats://127.0.0.1:4222",
        "nats_subject": "partner.bookings",
    }
    assert (await dev.post(f"/sandbox/webhooks/{endpoint_id}/edit", data=nats)).status_code == 303
    got = (await stack.hooks.GetEndpoint(ref)).endpoint
    assert got.type == wpb.DESTINATION_TYPE_NATS and got.nats.subject == "partner.bookings"
    http = {**form, "type": "http", "url": receiver.url("/h")}
    assert (await dev.post(f"/sandbox/webhooks/{endpoint_id}/edit", data=http)).status_code == 303
    got = (await stack.hooks.GetEndpoint(ref)).endpoint
    assert got.type == wpb.DESTINATION_TYPE_HTTP and got.url == receiver.url("/h")
    trail = await stack.auth.ListAuditEvents(apb.ListAuditEventsRequest(account_id=stack.account_id))
    assert PASSWORD not in str(trail)
    destinations = [e.after["destination"] for e in trail.events if "destination" in e.after]
    assert any(d.startswith("nats: subject partner.bookings") for d in destinations), destinations
    await dev.aclose()
