"""The walls a partner hit in the portal, each reproduced in real headless Chromium (the system's
/usr/bin/chromium) against real authsvc, webhookd, edge and portal processes, then shown gone:

- reloading a result page repeated the action (a second key, a second endpoint; a 409 after a rotation
  and its secret lost): every form now answers 303 and a secret is a one-time sealed flash;
- destructive actions acted on one click: they ask first, without script;
- a key's scopes could not be edited: now they can, and the edge follows;
- Recover did not say what it did; unknown URLs showed Sanic's own page; /favicon.ico was missing;
- a refused API request's ``X-Request-Id`` led nowhere: the Request log finds it by id; the Notifications
  page says who gets alert e-mails.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tests.e2e.portal_stack import CHROMIUM, Stack, chromium, edge_get, join, running_stack, shot
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("walls")) as started:
        yield started


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def audit(stack: Stack, action: str = "", key_id: str = "") -> list[apb.AuditEvent]:
    with grpc.insecure_channel(stack.authsvc) as channel:
        got = auth_pb2_grpc.AuthServiceStub(channel).ListAuditEvents(
            apb.ListAuditEventsRequest(
                account_id=stack.account_id, page_size=100, action=action, key_id=key_id
            )
        )
    return list(got.events)


def sandbox_keys(stack: Stack, name: str) -> list[apb.ApiKey]:
    with grpc.insecure_channel(stack.authsvc) as channel:
        got = auth_pb2_grpc.AuthServiceStub(channel).ListKeys(
            apb.ListKeysRequest(
                account_id=stack.account_id,
                environment=apb.ENVIRONMENT_SANDBOX,
                include_revoked=True,
                page_size=100,
            )
        )
    return [k for k in got.keys if k.name == name]


def create_key(page: Any, stack: Stack, name: str, *scopes: str) -> str:
    """A sandbox key made in the portal; its secret, read from the page the form redirected to."""
    page.goto(f"{stack.portal}/sandbox/keys")
    page.fill("[data-testid=create-key] input[name=name]", name)
    for scope in scopes:
        page.check(f"[data-testid=create-key] input[value='{scope}']")
    page.click("[data-testid=create-key] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    return str(page.text_content("[data-testid=secret]")).strip()


def test_reloading_a_result_page_never_repeats_the_action(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "reload@acme.example", ipb.USER_ROLE_OWNER)

    # Create, reload: one key, one key.created; the secret once, then the "shown once" page.
    secret = create_key(page, stack, "reloaded", "account:read")
    assert secret.startswith("svc_test_")
    secret_url = page.url
    assert re.search(r"/sandbox/keys/key_\w+/secret$", secret_url) and secret not in secret_url
    page.reload()
    assert page.locator("[data-testid=secret]").count() == 0
    assert "This secret was shown once. Rotate the key to get a new one." in page.text_content("main")
    assert secret not in page.content()
    shot(page, "key-secret-shown-once")
    keys = sandbox_keys(stack, "reloaded")
    assert len(keys) == 1
    assert len(audit(stack, key_id=keys[0].id, action="key.created")) == 1

    # Rotate (asked first), reload: no 409, one rotation, the new secret shown once.
    page.goto(f"{stack.portal}/sandbox/keys/{keys[0].id}")
    page.click("[data-testid=rotate] button[type=submit]")
    page.click("[data-testid=confirm] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    rotated = str(page.text_content("[data-testid=secret]")).strip()
    assert rotated != secret
    reloaded = page.reload()
    assert reloaded.status == 200
    assert page.locator("[data-testid=secret]").count() == 0
    assert "shown once" in page.text_content("main")
    assert len(audit(stack, key_id=keys[0].id, action="key.rotated")) == 1
    assert len(sandbox_keys(stack, "reloaded")) == 2
    assert edge_get(stack, rotated).status_code == 200

    # Add an endpoint, reload: one endpoint; the signing secret once.
    url = stack.receiver.url("/reloaded")
    page.goto(f"{stack.portal}/sandbox/webhooks")
    page.fill("[data-testid=endpoint-form] input[name=url]", url)
    page.check("[data-testid=endpoint-form] input[value='booking.confirmed']")
    page.click("[data-testid=endpoint-form] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    assert "Endpoint added" in page.text_content("[data-testid=notice]")
    page.reload()
    assert page.locator("[data-testid=secret]").count() == 0
    assert page.locator("[data-testid=notice]").count() == 0
    assert "shown once" in page.text_content("main")
    page.goto(f"{stack.portal}/sandbox/webhooks")
    assert page.locator(f"[data-testid=endpoints] a:text-is('{url}')").count() == 1
    context.close()


def test_destructive_actions_ask_first_and_every_action_says_what_it_did(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "confirm@acme.example", ipb.USER_ROLE_OWNER)
    url = stack.receiver.url("/confirm")
    page.goto(f"{stack.portal}/sandbox/webhooks")
    page.fill("[data-testid=endpoint-form] input[name=url]", url)
    page.check("[data-testid=endpoint-form] input[value='booking.confirmed']")
    page.click("[data-testid=endpoint-form] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    endpoint_url = page.url.removesuffix("/secret")
    endpoint_id = endpoint_url.rsplit("/", 1)[1]

    # Save and Recover say what they did; Recover with the count webhookd queued.
    page.goto(endpoint_url)
    page.fill("[data-testid=endpoint-form] input[name=description]", "saved")
    page.click("[data-testid=endpoint-form] button[type=submit]")
    assert page.text_content("[data-testid=notice]") == "Endpoint saved."
    page.click("[data-testid=recover] button")
    notice = str(page.text_content("[data-testid=notice]"))
    queued = re.match(r"(\d+) deliver(?:y|ies) queued", notice)
    assert queued, notice
    recovered = [
        e for e in audit(stack, action="webhook_endpoint.recovered") if e.after["endpoint_id"] == endpoint_id
    ]
    count = recovered[0].after["recovered"]  # a Struct number: a float
    assert isinstance(count, float) and int(queued[1]) == int(count)
    page.reload()
    assert page.locator("[data-testid=notice]").count() == 0  # once

    # Delete asks first (a page of its own, no script); Cancel keeps the endpoint.
    page.click("[data-testid=delete] button")
    page.wait_for_selector("[data-testid=confirm]")
    assert "cannot be undone" in page.text_content("[data-testid=confirm]")
    shot(page, "endpoint-delete-confirm")
    page.click("[data-testid=cancel]")
    page.wait_for_url(endpoint_url)
    page.click("[data-testid=delete] button")
    page.click("[data-testid=confirm] button[type=submit]")
    page.wait_for_url(f"{stack.portal}/sandbox/webhooks")
    assert "deleted" in page.text_content("[data-testid=notice]")
    assert page.locator(f"[data-testid=endpoints] a:text-is('{url}')").count() == 0

    # Remove a user asks first too; the role change says it happened.
    other, _ = join(browser, stack, "removed@acme.example", ipb.USER_ROLE_DEVELOPER)
    other.close()
    page.goto(f"{stack.portal}/sandbox/users")
    row = page.locator("tr:has-text('removed@acme.example')")
    row.locator("select[name=role]").select_option("viewer")
    row.locator("button:text-is('Change')").click()
    assert "removed@acme.example is now viewer" in page.text_content("[data-testid=notice]")
    page.locator("tr:has-text('removed@acme.example') button:text-is('Remove…')").click()
    page.wait_for_selector("[data-testid=confirm]")
    assert "Remove removed@acme.example?" in page.text_content("h1")
    page.click("[data-testid=confirm] button[type=submit]")
    assert page.text_content("[data-testid=notice]") == "User removed."
    assert "removed@acme.example" not in page.text_content("[data-testid=users]")
    context.close()


def test_editing_a_keys_scopes_and_the_edge_follows(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "editor@acme.example", ipb.USER_ROLE_OWNER)
    secret = create_key(page, stack, "narrow", "hotels:read")
    refused = edge_get(stack, secret)  # GET /v1/account needs account:read
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "missing_scope"
    key_id = sandbox_keys(stack, "narrow")[0].id
    page.goto(f"{stack.portal}/sandbox/keys/{key_id}")

    # A refusal is shown beside its field, with what was typed.
    form = "[data-testid=edit-key]"
    page.fill(f"{form} input[name=rate_limit]", "1000000")  # above authsvc's bound
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector(f"{form} [data-field=rate_limit]")
    page.uncheck(f"{form} input[value='hotels:read']")
    page.fill(f"{form} input[name=rate_limit]", "0")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector(f"{form} [data-field=scopes]")
    assert "at least one scope" in page.text_content(f"{form} [data-field=scopes]")

    page.check(f"{form} input[value='hotels:read']")
    page.check(f"{form} input[value='account:read']")
    page.fill(f"{form} input[name=name]", "wider")
    page.fill(f"{form} input[name=rate_limit]", "7")
    shot(page, "key-edit")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("[data-testid=notice]")
    saved = time.monotonic()
    assert "Key saved" in page.text_content("[data-testid=notice]")
    facts = page.text_content("dl.facts")
    assert "account:read" in facts and "hotels:read" in facts and "7 requests a second" in facts
    while edge_get(stack, secret).status_code != 200:
        assert time.monotonic() - saved < 2.0, "the edge still answers by the old scopes after 2 s"
        time.sleep(0.05)

    # authsvc audited it with before and after; the audit page shows it as fields, not JSON.
    updated = audit(stack, key_id=key_id, action="key.updated")
    assert len(updated) == 1
    page.goto(f"{stack.portal}/sandbox/audit?key_id={key_id}&action=key.updated")
    changes = page.text_content("[data-testid=changes]")
    assert "scopes" in changes and "account:read" in changes and "{" not in changes
    shot(page, "audit-key-updated")
    context.close()


def test_unknown_urls_and_the_favicon(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "lost@acme.example", ipb.USER_ROLE_VIEWER)
    blocked: list[str] = []
    page.on(
        "console", lambda msg: blocked.append(msg.text) if "Content Security Policy" in msg.text else None
    )
    answer = page.goto(f"{stack.portal}/sandbox/no-such-page")
    assert answer.status == 404
    assert page.text_content("[data-testid=request-id]").startswith("req_")
    assert "There is no page at this address" in page.text_content("main")
    assert page.locator("nav").count() == 1  # signed in: the portal's own menu
    assert "SANDBOX" in page.text_content("[data-testid=env]")
    assert blocked == []
    shot(page, "not-found")
    icon = page.request.get(f"{stack.portal}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert page.get_attribute("link[rel=icon]", "href") == "/static/favicon.svg"
    context.close()


def test_a_refused_requests_id_is_found_in_the_request_log(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "lookup@acme.example", ipb.USER_ROLE_OWNER)
    secret = create_key(page, stack, "looked-up", "hotels:read")
    refused = edge_get(stack, secret)  # GET /v1/account needs account:read
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "missing_scope"
    request_id = refused.headers["X-Request-Id"]
    assert request_id.startswith("req_")

    # Look it up by id on the Request log page, as a partner pastes it from the error. The edge flushes
    # its request log to authsvc within about a second: look again for a few seconds at most.
    row = page.locator(f"[data-testid=requests] tr[data-request-id='{request_id}']")
    asked = time.monotonic()
    while True:
        page.goto(f"{stack.portal}/sandbox/requests")
        page.fill("[data-testid=lookup] input[name=request_id]", request_id)
        page.click("[data-testid=lookup] button")
        page.wait_for_url(re.compile(rf"/sandbox/requests\?request_id={request_id}$"))
        if row.count() == 1:
            break
        assert "No request" in page.text_content("[data-testid=requests]")
        assert time.monotonic() - asked < 5.0, "the refused request is not in the request log after 5 s"
        time.sleep(0.2)
    cells = [str(c).strip() for c in row.locator("td").all_text_contents()]
    assert cells[1:5] == ["GET", "/v1/account", "403", "missing_scope"]
    assert cells[5].startswith("svc_test_...") and cells[7] == request_id
    assert row.get_attribute("data-status") == "403"
    shot(page, "request-lookup")

    # The sandbox's listing shows it too, newest first; the live one does not.
    page.goto(f"{stack.portal}/sandbox/requests")
    assert page.locator(f"tr[data-request-id='{request_id}']").count() == 1
    shot(page, "requests")
    page.goto(f"{stack.portal}/live/requests")
    assert page.locator(f"tr[data-request-id='{request_id}']").count() == 0

    # Who gets alert e-mails: the owners and admins (this user among them) and extra addresses.
    page.goto(f"{stack.portal}/sandbox/notifications")
    assert "lookup@acme.example" in page.text_content("[data-testid=portal-recipients]")
    assert page.locator("[data-testid=add-extra]").count() == 1
    shot(page, "notifications")
    context.close()
