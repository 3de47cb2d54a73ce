"""The endpoint form's Destination section, a polling endpoint's page and the Receiver authentication
section, in real headless Chromium against real processes (the ``stack`` and ``browser`` of
tests/e2e/portal_stack.py), each checked for what it shows and then photographed
(PORTAL_SCREENSHOTS=docs/portal refreshes docs/portal/endpoint-form-amqp.png, endpoint-amqp.png,
endpoint-polling.png and endpoint-receiver-auth.png)."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import re
from typing import Any

import grpc
import pytest

from tests.e2e.portal_stack import CHROMIUM, SHOTS, Stack, browser, join, shot, stack  # noqa: F401 (fixtures)
from tests.support import event_data
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")
FORM = "[data-testid=endpoint-form]"
PASSWORD = "amqp-pw-Zq8v7Lr2Nm4Kx6"
CLIENT_SECRET = "cs_browser-" + "Q7" * 10


def _part(page: Any, selector: str, name: str) -> None:
    """A screenshot of one part of the page (the section the picture is about)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(selector).screenshot(path=str(SHOTS / f"{name}.png"))


def _endpoint_id(page: Any) -> str:
    found = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)", page.url)
    assert found, page.url
    return found[1]


def test_destination_form_polling_page_and_receiver_auth(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "destinations@acme.example", ipb.USER_ROLE_OWNER)

    # The form's Destination section, RabbitMQ chosen and filled in.
    page.goto(f"{stack.portal}/sandbox/webhooks")
    assert page.is_checked(f"{FORM} input[name=type][value=http]")  # the default, stated
    choices = page.text_content(f"{FORM} [data-testid=destinations]")
    assert all(word in choices for word in ("http", "polling", "amqp", "nats"))
    page.check(f"{FORM} input[name=type][value=amqp]")
    if not page.evaluate("document.querySelector('[data-testid=amqp-settings]').open"):
        page.click(f"{FORM} [data-testid=amqp-settings] summary")
    page.fill(f"{FORM} input[name=amqp_url]", "amqp://svc@127.0.0.1:5672/%2F")
    page.fill(f"{FORM} input[name=amqp_exchange]", "partner.events")
    page.fill(f"{FORM} input[name=amqp_routing_key]", "bookings")
    page.fill(f"{FORM} input[name=amqp_password]", PASSWORD)
    page.check(f"{FORM} input[value='booking.cancelled']")
    assert page.is_visible(f"{FORM} input[name=amqp_exchange]")
    _part(page, f"{FORM} [data-testid=destinations]", "endpoint-form-amqp")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    destination = page.text_content("[data-testid=endpoint-destination]")
    assert (
        destination == "amqp: exchange partner.events, routing key bookings at amqp://svc@127.0.0.1:5672/%2F"
    )
    amqp_id = _endpoint_id(page)
    page.goto(f"{stack.portal}/sandbox/webhooks/{amqp_id}")
    assert PASSWORD not in page.content()  # write-only: the form says it is set, never what it is
    assert (
        page.get_attribute(f"{FORM} input[name=amqp_password]", "placeholder")
        == "set: leave empty to keep it"
    )
    shot(page, "endpoint-amqp")

    # A polling endpoint: no URL, its consumers' line instead.
    page.goto(f"{stack.portal}/sandbox/webhooks")
    page.check(f"{FORM} input[name=type][value=polling]")
    page.check(f"{FORM} input[value='booking.confirmed']")
    page.fill(f"{FORM} input[name=description]", "agency behind a firewall")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    poll_id = _endpoint_id(page)
    scope: dict[str, Any] = {"account_id": stack.account_id, "environment": wpb.ENVIRONMENT_SANDBOX}
    with grpc.insecure_channel(stack.webhookd) as channel:
        hooks = wpb_grpc.WebhookServiceStub(channel)
        for n in range(3):
            hooks.PublishEvent(
                wpb.PublishEventRequest(
                    **scope,
                    type="booking.confirmed",
                    data=event_data("booking.confirmed", booking=f"bk_b{n}"),
                )
            )
        leased = hooks.PollEndpoint(
            wpb.PollEndpointRequest(**scope, endpoint_id=poll_id, limit=2, lease_seconds=600)
        )
    assert len(leased.events) == 2
    page.goto(f"{stack.portal}/sandbox/webhooks/{poll_id}")
    assert page.text_content("[data-testid=endpoint-destination]") == "polling"
    status = page.text_content("[data-testid=poll-status]")
    assert re.fullmatch(
        r"1 batch leased now \(2 events\), 3 events waiting; last polled \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
        status or "",
    ), status
    shot(page, "endpoint-polling")

    # An HTTP endpoint's Receiver authentication: OAuth2 client credentials and a header, set by its form.
    page.goto(f"{stack.portal}/sandbox/webhooks")
    page.fill(f"{FORM} input[name=url]", stack.receiver.url("/rx-auth"))
    page.check(f"{FORM} input[value='booking.confirmed']")
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    http_id = _endpoint_id(page)
    page.goto(f"{stack.portal}/sandbox/webhooks/{http_id}")
    assert "None: the receiver checks our signature only." in page.text_content("[data-testid=receiver-auth]")
    auth_form = "[data-testid=receiver-auth-form]"
    page.fill(f"{auth_form} input[name=token_url]", stack.receiver.url("/token"))
    page.fill(f"{auth_form} input[name=client_id]", "travel-hooks")
    page.fill(f"{auth_form} input[name=client_secret]", CLIENT_SECRET)
    page.fill(f"{auth_form} input[name=scope]", "hooks")
    page.fill(f"{auth_form} textarea[name=headers]", "X-Tenant: emea-7")
    page.click(f"{auth_form} button[type=submit]")
    page.wait_for_selector("[data-testid=oauth2]")
    oauth2 = page.text_content("[data-testid=oauth2]")
    assert f"token URL {stack.receiver.url('/token')}, client id travel-hooks, scope hooks" in oauth2
    assert "the client secret is kept sealed and never shown" in oauth2
    assert page.text_content("[data-testid=custom-headers]") == "X-Tenant: emea-7"
    assert CLIENT_SECRET not in page.content()
    shot(page, "endpoint-receiver-auth")
    context.close()
