"""In real headless Chromium against real processes (authsvc, webhookd, edge, portal, an HTTPS receiver,
an SMTP server): a sandbox endpoint driven to 50 % of its road to being disabled with the portal's sandbox
clock (on the delivery log filtered to that endpoint, which the clock keeps) e-mails the account's owner a
link to the endpoint's portal page, which opens; and a revoked key's page says when, why and by whom."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
import pytest

from tests.e2e.portal_stack import CHROMIUM, Stack, browser, join, shot, stack  # noqa: F401 (the fixtures)
from tests.support import event_data
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")

T = TypeVar("T")
SANDBOX = wpb.ENVIRONMENT_SANDBOX


def until(what: str, probe: Callable[[], T | None], seconds: float = 30) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds} s for {what}")


def test_failing_endpoint_email_links_its_portal_page(browser: Any, stack: Stack) -> None:
    owner = "alerted-owner@acme.example"
    context, page = join(browser, stack, owner, ipb.USER_ROLE_OWNER)
    stack.receiver.responder = lambda r: 503 if r.path.startswith("/failing") else 200
    with grpc.insecure_channel(stack.webhookd) as channel:
        hooks = wpb_grpc.WebhookServiceStub(channel)
        endpoint = hooks.RegisterEndpoint(
            wpb.RegisterEndpointRequest(
                account_id=stack.account_id,
                environment=SANDBOX,
                url=stack.receiver.url("/failing"),
                events=["booking.confirmed"],
            )
        ).endpoint.id
        event = hooks.PublishEvent(
            wpb.PublishEventRequest(
                account_id=stack.account_id,
                environment=SANDBOX,
                type="booking.confirmed",
                state="confirmed",
                data=event_data("booking.confirmed"),
            )
        ).event.id

        def attempts() -> int:
            got = hooks.ListDeliveries(
                wpb.ListDeliveriesRequest(account_id=stack.account_id, environment=SANDBOX, event_id=event)
            )
            return got.deliveries[0].attempt_count if got.deliveries else 0

        until("the first attempt", lambda: attempts() == 1)
        # The delivery log of that endpoint; each advance brings the next retry due now, and comes back
        # to the same filtered log.
        log = f"{stack.portal}/sandbox/deliveries?endpoint_id={endpoint}"
        page.goto(log)
        for n in (2, 3, 4):
            page.select_option("[data-testid=sandbox-clock] select[name=by]", "30m")
            page.click("[data-testid=sandbox-clock] button")
            page.wait_for_url(re.compile(re.escape(f"/sandbox/deliveries?endpoint_id={endpoint}") + "$"))
            assert "Sandbox clock advanced by 30m" in page.text_content("[data-testid=notice]")
            assert page.input_value("input[name=endpoint_id]") == endpoint
            until(f"attempt {n}", lambda n=n: attempts() == n)  # type: ignore[misc]
        shot(page, "deliveries-failing")

    def failing_mail() -> Any:
        return next((m for m in stack.inbox.messages if "failing" in str(m["Subject"])), None)

    mail = until("the failing e-mail", failing_mail)
    assert " ".join(str(mail["Subject"]).split()) == (
        f"Webhook endpoint {endpoint} failing: 50 % of the way to being disabled"
    )
    assert owner in str(mail["To"])
    body = mail.get_content()
    link = f"{stack.portal}/sandbox/webhooks/{endpoint}"
    assert link in re.findall(r"https?://\S+", body)
    assert f"POST /v1/webhooks/endpoints/{endpoint}/test" in body
    # The link opens the endpoint's page for the signed-in owner.
    page.goto(link)
    assert endpoint in page.content() and stack.receiver.url("/failing") in page.content()
    shot(page, "endpoint-from-alert")
    subjects = [" ".join(str(m["Subject"]).split()) for m in stack.inbox.messages]
    assert not any(f"{endpoint} disabled" in s for s in subjects)  # only warned, not disabled
    context.close()


def test_revoked_keys_page_says_when_why_and_who(browser: Any, stack: Stack) -> None:
    admin = "key-revoker@acme.example"
    context, page = join(browser, stack, admin, ipb.USER_ROLE_ADMIN)
    page.goto(f"{stack.portal}/sandbox/keys")
    page.fill("input[name=name]", "to-revoke")
    page.check("input[value='hotels:read']")
    page.click("[data-testid=create-key] button[type=submit]")
    page.wait_for_url(re.compile(r"/sandbox/keys/key_[A-Za-z0-9]+/secret$"))
    key_page = page.url.removesuffix("/secret")
    page.goto(key_page)
    assert page.query_selector("[data-testid=revoked-at]") is None
    page.fill("[data-testid=revoke] input[name=reason]", "left in a public repository")
    page.fill("[data-testid=revoke] input[name=confirm]", "to-revoke")
    page.click("[data-testid=revoke] button")
    page.wait_for_url(key_page)
    assert page.text_content("[data-testid=key-status]") == "revoked"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page.text_content("[data-testid=revoked-at]") or ""
    )
    assert page.text_content("[data-testid=revoke-reason]") == "left in a public repository"
    assert page.text_content("[data-testid=revoked-by]") == admin
    shot(page, "key-revoked")
    context.close()
