"""An endpoint's content filter and payload mode in the portal, in real headless Chromium against real
processes (the ``stack`` and ``browser`` of tests/e2e/portal_stack.py): a bad filter comes back beside
its field naming the operator's path, with what was typed; a good one, with a thin payload, makes the
endpoint get only the matching events, thin; the event page of an event the filter left out says
"filtered" for that endpoint."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import json
import time
from typing import Any

import grpc
import pytest

from svckit.signing import verify
from tests.e2e.portal_stack import CHROMIUM, Stack, browser, join, shot, stack  # noqa: F401 (fixtures)
from tests.support import event_data
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc as wpb_grpc
from webhookd.testing import Received

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")
FORM = "[data-testid=endpoint-form]"
BAD = '{"data": {"amount": {"$regex": "^1"}}}'
GOOD = '{"data": {"product": "hotels"}}'


def _publish(stack: Stack, product: str, booking: str) -> str:
    with grpc.insecure_channel(stack.webhookd) as channel:
        published = wpb_grpc.WebhookServiceStub(channel).PublishEvent(
            wpb.PublishEventRequest(
                account_id=stack.account_id,
                environment=wpb.ENVIRONMENT_SANDBOX,
                type="booking.confirmed",
                data=event_data("booking.confirmed", product=product, booking=booking),
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


def test_filter_error_beside_the_field_then_only_matching_thin_deliveries(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "filters@acme.example", ipb.USER_ROLE_OWNER)
    path = "/filtered-thin"
    page.goto(f"{stack.portal}/sandbox/webhooks")
    assert page.is_checked(f"{FORM} input[name=payload][value=full]")  # the default, stated
    page.fill(f"{FORM} input[name=url]", stack.receiver.url(path))
    page.check(f"{FORM} input[value='booking.confirmed']")
    page.check(f"{FORM} input[name=payload][value=thin]")
    page.fill(f"{FORM} textarea[name=filter]", BAD)
    page.click(f"{FORM} button[type=submit]")
    error = page.wait_for_selector(".field-error[data-field=filter]")
    assert "filter.data.amount.$regex" in error.text_content()
    assert "unknown operator $regex" in error.text_content()
    # Beside its field: right after the textarea's label, and what was typed is kept.
    assert page.evaluate(
        "document.querySelector('.field-error[data-field=filter]').previousElementSibling"
        ".querySelector('textarea[name=filter]') !== null"
    )
    assert page.input_value(f"{FORM} textarea[name=filter]") == BAD
    assert page.is_checked(f"{FORM} input[name=payload][value=thin]")
    shot(page, "endpoint-filter-error")

    page.fill(f"{FORM} textarea[name=filter]", GOOD)
    page.click(f"{FORM} button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    secret = page.text_content("[data-testid=secret]").strip()
    assert page.text_content("[data-testid=payload-mode]") == "thin"
    assert json.loads(page.text_content("[data-testid=filter]")) == json.loads(GOOD)
    endpoint_url = page.url.removesuffix("/secret")
    endpoint_id = endpoint_url.rsplit("/", 1)[1]

    hotel = _publish(stack, "hotels", "bk_filter_h")
    flight = _publish(stack, "flights", "bk_filter_f")
    got = _arrived(stack, path, hotel)
    body = json.loads(got.body)
    assert body["data"]["booking"] == "bk_filter_h" and "amount" not in body["data"]
    verify(
        got.body, {k.lower(): v for k, v in got.headers.items()}["x-service-signature"], [secret], time.time()
    )
    # The flight event's page: the endpoint is listed as filtered, with no delivery.
    page.goto(f"{stack.portal}/sandbox/events/{flight}")
    row = page.wait_for_selector("[data-testid=event-filtered]")
    assert endpoint_id in row.text_content() and "filtered" in row.text_content()
    shot(page, "event-filtered")
    page.goto(f"{stack.portal}/sandbox/events/{hotel}")
    assert page.locator("[data-testid=event-filtered]").count() == 0
    assert endpoint_id in page.text_content("[data-testid=event-deliveries]")
    assert not any(flight.encode() in r.body for r in stack.receiver.received() if r.path == path)

    # The edit form refuses a bad filter beside the field too, keeping the endpoint as it was.
    page.goto(endpoint_url)
    page.fill(f"{FORM} textarea[name=filter]", '{"type": {"$gt": [1]}}')
    page.click(f"{FORM} button[type=submit]")
    error = page.wait_for_selector(".field-error[data-field=filter]")
    assert "filter.type.$gt" in error.text_content()
    assert page.input_value(f"{FORM} textarea[name=filter]") == '{"type": {"$gt": [1]}}'
    assert json.loads(page.text_content("[data-testid=filter]")) == json.loads(GOOD)
    context.close()
