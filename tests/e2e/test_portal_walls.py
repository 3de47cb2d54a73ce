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

import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import grpc
import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from edge.docsite import slug
from edge.testing import SANDBOX_HOST
from svckit import catalog
from svckit.errors import ERROR_KINDS
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
    page.click("[data-testid=recover] button")  # counts first (a dry run), then asks
    page.wait_for_selector("[data-testid=confirm]")
    page.click("[data-testid=confirm] button[type=submit]")
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


def _payload(page: Any) -> dict[str, Any]:
    return dict(json.loads(str(page.text_content("[data-testid=payload]"))))


def _newest_event(page: Any, stack: Stack, env: str, kind: str, within: float = 10.0) -> dict[str, Any]:
    """The newest event of ``kind`` on the portal's Events page of ``env``, opened: its payload."""
    deadline = time.monotonic() + within
    while True:
        page.goto(f"{stack.portal}/{env}/events?kind={kind}")
        rows = page.locator("[data-testid=event-row]")
        if rows.count():
            rows.first.locator("a").first.click()
            page.wait_for_selector("[data-testid=payload]")
            assert page.text_content("[data-testid=event-kind]") == kind
            return _payload(page)
        assert time.monotonic() < deadline, f"no {kind} event on /{env}/events after {within} s"
        time.sleep(0.2)


def test_live_and_sandbox_events_have_one_shape_the_catalogs(browser: Any, stack: Stack) -> None:
    """A key revoked in live (authsvc publishes apikey.revoked) and the sandbox's sample of the same kind,
    each read from the portal's event page, both validate against the catalog's schema, with the same
    fields; /v1/event-types serves that same schema."""
    context, page = join(browser, stack, "shapes@acme.example", ipb.USER_ROLE_OWNER)
    page.goto(f"{stack.portal}/live/keys")
    page.fill("[data-testid=create-key] input[name=name]", "short-lived")
    page.check("[data-testid=create-key] input[value='account:read']")
    page.click("[data-testid=create-key] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    key_url = page.url.removesuffix("/secret")
    page.goto(key_url)
    page.fill("[data-testid=revoke] input[name=reason]", "leaked in a log")
    page.fill("[data-testid=revoke] input[name=confirm]", "short-lived")
    page.click("[data-testid=revoke] button[type=submit]")
    page.wait_for_selector("[data-testid=key-status]:has-text('revoked')")
    live = _newest_event(page, stack, "live", "apikey.revoked")
    assert page.text_content("[data-testid=livemode]") == "false" or live["livemode"] is True
    shot(page, "event-live")

    secret = create_key(page, stack, "sampler", "webhooks:write", "account:read")
    sent = _sample_event(stack, secret, "apikey.revoked")
    assert sent.status_code == 202, sent.text
    sample = _newest_event(page, stack, "sandbox", "apikey.revoked")

    types = httpx.get(
        f"{stack.edge_sandbox}/v1/event-types",
        headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"},
        timeout=5,
    )
    assert types.status_code == 200, types.text
    served = {t["kind"]: t for t in types.json()["data"]}["apikey.revoked"]
    assert served["schema"] == catalog.schema("apikey.revoked")
    for envelope, livemode in ((live, True), (sample, False)):
        validator = Draft202012Validator(
            catalog.envelope_schema("apikey.revoked"), format_checker=FormatChecker()
        )
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(envelope)
        ]
        assert errors == [], errors
        assert envelope["livemode"] is livemode
    assert live["data"].keys() == sample["data"].keys()
    assert (live["data"]["name"], live["data"]["reason"]) == ("short-lived", "leaked in a log")
    context.close()


def test_every_doc_url_opens_its_section(browser: Any, stack: Stack) -> None:
    """Real refusals' docUrls, opened in the browser, land on their section of the docs the edge serves;
    every other error type's anchor is on the same page. (The test edge listens on a free port but answers
    for the default sandbox host its docUrls name: the browser's requests for that host are carried to it
    with their Host unchanged.)"""
    context = browser.new_context()

    def to_test_edge(route: Any) -> None:
        url = urlsplit(route.request.url)
        got = httpx.get(f"{stack.edge_sandbox}{url.path}", headers={"Host": SANDBOX_HOST}, timeout=5)
        route.fulfill(status=got.status_code, headers=dict(got.headers), body=got.content)

    context.route(f"http://{SANDBOX_HOST}/**", to_test_edge)
    page = context.new_page()
    sent = {"Host": SANDBOX_HOST}
    answers = {
        "missing_api_key": httpx.get(f"{stack.edge_sandbox}/v1/account", headers=sent, timeout=5),
        "invalid_api_key": edge_get(stack, "svc_test_nope"),
        "not_found": httpx.get(f"{stack.edge_sandbox}/v1/nothing/here", headers=sent, timeout=5),
    }
    for etype, answer in answers.items():
        error = answer.json()["error"]
        assert error["type"] == etype, error
        assert error["docUrl"] == f"http://{SANDBOX_HOST}/docs/errors#{slug(etype)}", error["docUrl"]
        page.goto("about:blank")  # else a second docUrl is only a change of fragment
        opened = page.goto(error["docUrl"])
        assert opened is not None and opened.status == 200
        section = page.locator(f"[id='{slug(etype)}']")
        assert section.count() == 1 and section.is_visible(), etype
        assert section.text_content() == etype
    for etype in ERROR_KINDS:
        assert page.locator(f"h2[id='{slug(etype)}']").count() == 1, etype
    shot(page, "docs-errors", full_page=False)  # the section the last docUrl opened
    context.close()


def test_the_sandbox_clock_walks_an_endpoint_to_disabled_the_alert_and_recovery(
    browser: Any, stack: Stack
) -> None:
    """From the portal only: an extra alert address, an endpoint whose receiver fails, a test event, then
    the sandbox clock's button through 1m…24h: each retry comes at once, the 7th failure disables the
    endpoint and the alert e-mail reaches the portal's owners and the extra address; fixed, enabled and
    recovered, the event is delivered. (The event is the sandbox's sample, as `svc trigger` sends it.)"""
    context, page = join(browser, stack, "clock@acme.example", ipb.USER_ROLE_OWNER)
    page.goto(f"{stack.portal}/sandbox/notifications")
    page.fill("[data-testid=add-extra] input[name=email]", "oncall@acme.example")
    page.click("[data-testid=add-extra] button")
    assert "oncall@acme.example now receives alert e-mails." in page.text_content("[data-testid=notice]")
    page.reload()
    assert page.locator("[data-testid=extra-addresses] td:text-is('oncall@acme.example')").count() == 1

    path = "/clock-wall"
    failing = {"now": True}
    stack.receiver.responder = lambda r: 500 if r.path == path and failing["now"] else 200
    hits = lambda: sum(1 for r in stack.receiver.requests if r.path == path)  # noqa: E731
    try:
        page.goto(f"{stack.portal}/sandbox/webhooks")
        page.fill("[data-testid=endpoint-form] input[name=url]", stack.receiver.url(path))
        page.check("[data-testid=endpoint-form] input[value='booking.confirmed']")
        page.click("[data-testid=endpoint-form] button[type=submit]")
        page.wait_for_selector("[data-testid=secret]")
        endpoint_url = page.url.removesuffix("/secret")
        secret = create_key(page, stack, "trigger", "webhooks:write")
        sent = _sample_event(stack, secret, "booking.confirmed")  # as `svc trigger booking.confirmed`
        assert sent.status_code == 202, sent.text
        log = f"{stack.portal}/sandbox/deliveries?endpoint_id={endpoint_url.rsplit('/', 1)[1]}"
        _until(lambda: _delivery_row(page, log) == ["pending", "1"], "the first attempt failed")
        mails = len(stack.inbox.messages)
        for n, step in enumerate(("1m", "5m", "30m", "2h", "6h", "24h"), start=2):
            page.select_option("[data-testid=sandbox-clock] select[name=by]", step)
            page.click("[data-testid=sandbox-clock] button")
            notice = page.text_content("[data-testid=notice]")
            assert notice == f"Sandbox clock advanced by {step}: 1 delivery due now", notice
            final = "failed" if n == 7 else "pending"
            _until(lambda: _delivery_row(page, log) == [final, str(n)], f"attempt {n} after {step}")  # noqa: B023
        assert hits() == 7
        shot(page, "deliveries-clock")
        page.goto(endpoint_url)
        _until(lambda: "disabled" in _status(page, endpoint_url), "the endpoint disabled")
        shot(page, "endpoint-disabled")

        # The failing e-mails (50 %, 90 %) came on the way; then the disable e-mail, to the same people.
        endpoint_id = endpoint_url.rsplit("/", 1)[1]

        def alerts(what: str) -> list[Any]:
            mine = stack.inbox.messages[mails:]
            return [m for m in mine if f"{endpoint_id} {what}" in " ".join(str(m["Subject"]).split())]

        _until(lambda: bool(alerts("disabled")), "the disable e-mail")
        assert len(alerts("failing")) == 2  # 50 % and 90 %, before it
        for mail in alerts("disabled") + alerts("failing"):
            to = {a.strip() for a in str(mail["To"]).split(",")}
            assert {"clock@acme.example", "oncall@acme.example"} <= to, to

        failing["now"] = False
        page.goto(endpoint_url)
        page.click("button:text-is('Enable')")
        assert "enabled" == _status(page, endpoint_url)
        page.click("[data-testid=recover] button")
        assert re.match(r"Recover [1-9]\d* deliver(y|ies)\?", str(page.text_content("h1")))
        page.click("[data-testid=confirm] button[type=submit]")
        assert re.match(r"[1-9]\d* deliver(y|ies) queued", str(page.text_content("[data-testid=notice]")))
        _until(lambda: hits() == 8, "the recovered delivery")
    finally:
        stack.receiver.responder = lambda _r: 200
    context.close()


def _sample_event(stack: Stack, secret: str, kind: str) -> httpx.Response:
    """POST /v1/sandbox/events: the sandbox's sample of ``kind``, as ``svc trigger`` sends it."""
    return httpx.post(
        f"{stack.edge_sandbox}/v1/sandbox/events",
        headers={
            "Host": SANDBOX_HOST,
            "Authorization": f"Svc {secret}",
            "Idempotency-Key": f"sample-{time.time_ns()}",
        },
        json={"type": kind},
        timeout=5,
    )


def _delivery_row(page: Any, log: str) -> list[str]:
    """Status and attempts of the one delivery on the delivery log page ``log``, loaded afresh."""
    page.goto(log)
    cells = page.locator("[data-testid=deliveries] tbody tr").first.locator("td").all_text_contents()
    return [c.strip() for c in cells[3:5]]


def _status(page: Any, endpoint_url: str) -> str:
    page.goto(endpoint_url)
    return str(page.text_content("dl.facts dt:text-is('Status') + dd")).strip()


def _until(check: Any, what: str, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {within} s"

        time.sleep(0.1)
