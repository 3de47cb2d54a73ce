"""The portal's endpoint form offers "*" (every kind, kinds added later included) and shows webhookd's
refusal of "*" with other kinds beside the field, over real HTTP against a real webhookd."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

from tests.integration.portal_stack import Stack, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.webhooks.v1 import webhooks_pb2 as wpb


async def test_the_endpoint_form_subscribes_to_every_kind(stack: Stack) -> None:
    owner = await stack.join("every-kind@acme.example")
    page = await owner.get("/sandbox/webhooks")
    assert 'name="events" value="*"' in page.text
    token = csrf_of(page.text)
    url = "http://127.0.0.1:9/every"
    mixed = await owner.post(
        "/sandbox/webhooks", data={"csrf": token, "url": url, "events": ["*", "booking.confirmed"]}
    )
    assert mixed.status_code == 400 and "means every kind" in mixed.text
    assert 'data-field="events"' in mixed.text
    made = await owner.post("/sandbox/webhooks", data={"csrf": token, "url": url, "events": ["*"]})
    assert made.status_code == 303, made.text
    listed = await stack.hooks.ListEndpoints(
        wpb.ListEndpointsRequest(account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX)
    )
    (endpoint,) = [e for e in listed.endpoints if e.url == url]
    assert list(endpoint.events) == ["*"]
    shown = await owner.get(f"/sandbox/webhooks/{endpoint.id}")
    assert 'name="events" value="*" checked' in shown.text
    await owner.aclose()
