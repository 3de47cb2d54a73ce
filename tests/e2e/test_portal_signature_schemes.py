"""An endpoint's signature scheme in the portal, in real headless Chromium against real processes (the
``stack`` and ``browser`` of tests/e2e/portal_stack.py): registered as ``standard``, a delivery reaches the
HTTPS receiver and verifies with the ``standardwebhooks`` library, and its ``v1a`` signature with the
public key the endpoint page shows; edited to ``both``, the next delivery carries both header families.
An unknown scheme is refused beside its field; recovering counts first and changes nothing until asked."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import base64
import re
import time
from typing import Any

import grpc
import pytest
import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from svckit.signing import verify
from tests.e2e.portal_stack import (  # noqa: F401 (the fixtures)
    CHROMIUM,
    Stack,
    _csrf,
    browser,
    join,
    shot,
    stack,
)
from tests.support import event_data
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc as wpb_grpc
from webhookd.testing import Received

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")
FORM = "[data-testid=endpoint-form]"


def _publish(stack: Stack, booking: str) -> str:
    with grpc.insecure_channel(stack.webhookd) as channel:
        published = wpb_grpc.WebhookServiceStub(channel).PublishEvent(
            wpb.PublishEventRequest(
                account_id=stack.account_id,
                environment=wpb.ENVIRONMENT_SANDBOX,
                type="booking.confirmed",
                state="confirmed",
                data=event_data("booking.confirmed", booking=booking),
            )
        )
    return str(published.event.id)


def _arrived(stack: Stack, path: str, event_id: str) -> Received:
    deadline = time.monotonic() + 15
    while True:
        for got in stack.receiver.received():
            if got.path == path and event_id.encode() in got.body:
                return got
        assert time.monotonic() < deadline, f"no delivery of {event_id} at {path}"
        time.sleep(0.05)


def _audit(stack: Stack, action: str) -> list[apb.AuditEvent]:
    with grpc.insecure_channel(stack.authsvc) as channel:
        got = auth_pb2_grpc.AuthServiceStub(channel).ListAuditEvents(
            apb.ListAuditEventsRequest(account_id=stack.account_id, page_size=100, action=action)
        )
    return list(got.events)


def _recovered(stack: Stack) -> dict[str, set[str]]:
    """The endpoints recovered, each with the fields its audit record has."""
    recovered = _audit(stack, "webhook_endpoint.recovered")
    return {str(e.after["endpoint_id"]): set(e.after.keys()) for e in recovered}


def _v1a_verifies(got: Received, public_key: str) -> bool:
    """Whether one ``v1a`` entry of the delivery verifies with the public key, as a receiver checks it."""
    content = f"{got.headers['webhook-id']}.{got.headers['webhook-timestamp']}.".encode() + got.body
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_")))
    for entry in got.headers["webhook-signature"].split(" "):
        version, _, sig = entry.partition(",")
        if version == "v1a":
            try:
                key.verify(base64.b64decode(sig), content)
            except InvalidSignature:
                continue  # the next entry may be the one
            return True
    return False


def test_standard_then_both_verify_at_a_real_receiver(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "schemes@acme.example", ipb.USER_ROLE_OWNER)
    path = "/standard"
    page.goto(f"{stack.portal}/sandbox/webhooks")
    # The default is the spec's header, stated on the form.
    assert page.is_checked(f"{FORM} input[name=signature_scheme][value=stripe]")
    page.fill(f"{FORM} input[name=url]", stack.receiver.url(path))
    page.check(f"{FORM} input[value='booking.confirmed']")
    page.check(f"{FORM} input[name=signature_scheme][value=standard]")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    secret = page.text_content("[data-testid=secret]").strip()
    assert page.text_content("[data-testid=signature-scheme]") == "standard"
    public_keys = [k.strip() for k in page.locator("[data-testid=public-key]").all_text_contents()]
    assert len(public_keys) == 1 and public_keys[0].startswith("whpk_"), public_keys
    assert secret not in public_keys[0]
    shot(page, "endpoint-standard")
    endpoint_url = page.url.removesuffix("/secret")
    # The edit form shows the scheme the endpoint has.
    assert page.is_checked(f"{FORM} input[name=signature_scheme][value=standard]")

    event_id = _publish(stack, "bk_standard")
    got = _arrived(stack, path, event_id)
    assert standardwebhooks.Webhook(secret).verify(got.body, got.headers)["id"] == event_id
    assert got.headers["webhook-id"] == event_id
    assert "x-service-signature" not in {name.lower() for name in got.headers}
    assert _v1a_verifies(got, public_keys[0])

    # Edited to both: the page says so and still shows the key; the next delivery verifies both ways.
    page.goto(endpoint_url)
    page.check(f"{FORM} input[name=signature_scheme][value=both]")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=signature-scheme]:text-is('both')")
    assert page.text_content("[data-testid=notice]") == "Endpoint saved."
    assert [k.strip() for k in page.locator("[data-testid=public-key]").all_text_contents()] == public_keys
    assert page.is_checked(f"{FORM} input[name=signature_scheme][value=both]")
    shot(page, "endpoint-both")
    event_id = _publish(stack, "bk_both")
    got = _arrived(stack, path, event_id)
    assert standardwebhooks.Webhook(secret).verify(got.body, got.headers)["id"] == event_id
    assert _v1a_verifies(got, public_keys[0])
    headers = {name.lower(): value for name, value in got.headers.items()}
    verify(got.body, headers["x-service-signature"], [secret], time.time())

    # The change is in the audit trail, with the scheme before and after.
    updated = _audit(stack, "webhook_endpoint.updated")
    changes = [(e.before["signature_scheme"], e.after["signature_scheme"]) for e in updated]
    assert ("standard", "both") in changes, changes

    # An unknown scheme is refused beside its field, and the endpoint keeps its scheme.
    refused = page.request.post(
        f"{endpoint_url}/edit",
        form={
            "csrf": _csrf(page),
            "url": stack.receiver.url(path),
            "events": "booking.confirmed",
            "signature_scheme": "rot13",
        },
        max_redirects=0,
    )
    assert refused.status == 400
    assert re.search(r'data-field="signature_scheme">choose one of stripe, standard, both<', refused.text())
    page.goto(endpoint_url)
    assert page.text_content("[data-testid=signature-scheme]") == "both"

    # Back to the spec's header: no public keys on the page (its deliveries carry no v1a).
    page.check(f"{FORM} input[name=signature_scheme][value=stripe]")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=signature-scheme]:text-is('stripe')")
    assert page.locator("[data-testid=signing-keys]").count() == 0
    context.close()


def test_recover_counts_first_and_changes_nothing_until_confirmed(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "dryrun@acme.example", ipb.USER_ROLE_OWNER)
    page.goto(f"{stack.portal}/sandbox/webhooks")
    page.fill(f"{FORM} input[name=url]", stack.receiver.url("/dry-run"))
    page.check(f"{FORM} input[value='booking.confirmed']")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    endpoint_url = page.url.removesuffix("/secret")
    endpoint_id = endpoint_url.rsplit("/", 1)[1]

    page.goto(endpoint_url)
    page.click("[data-testid=recover] button")
    page.wait_for_selector("[data-testid=confirm]")
    assert page.text_content("h1") == "Nothing to recover"
    shot(page, "endpoint-recover-confirm")
    page.click("[data-testid=cancel]")
    page.wait_for_url(endpoint_url)
    assert endpoint_id not in _recovered(stack)
    # Confirmed: queued and audited.
    page.click("[data-testid=recover] button")
    page.click("[data-testid=confirm] button[type=submit]")
    assert re.match(r"0 deliveries queued", str(page.text_content("[data-testid=notice]")))
    assert _recovered(stack)[endpoint_id] == {"since", "recovered", "endpoint_id", "environment"}
    context.close()
