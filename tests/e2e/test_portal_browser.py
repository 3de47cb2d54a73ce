"""The partner portal in real headless Chromium (Playwright, the system's /usr/bin/chromium) against
real processes: authsvc, webhookd, edge and portal, and a trustme HTTPS webhook receiver.

One journey (sign in, create a key, use it at the edge, rotate, revoke, register an endpoint, send a
test, resend) plus the refusals: roles, CSRF, stale sessions, XSS. Every page visited is saved as a
screenshot: in a temporary folder, or in the folder ``PORTAL_SCREENSHOTS`` names (``docs/portal`` to
refresh the documentation's), so a test run leaves the checkout as it was.
"""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import hashlib
import pathlib
import re
import secrets
import time
from typing import Any

import grpc
import httpx
import pytest

from tests.e2e.portal_stack import (  # noqa: F401 (the fixtures)
    CHROMIUM,
    PASSWORD,
    Stack,
    _audit_trail,
    _csrf,
    _forms,
    _post,
    browser,
    edge_get,
    enrol_totp,
    invite,
    join,
    shot,
    stack,
)
from tests.support import ServiceProcess, event_data
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")


def test_owner_journey(browser: Any, stack: Stack) -> None:
    context, page = join(browser, stack, "owner@acme.example", ipb.USER_ROLE_OWNER)
    shot(page, "overview")

    # Sign out and back in through the sign-in page.
    page.click("text=Sign out")
    page.wait_for_url(re.compile(r"/signin$"))
    page.fill("input[name=email]", "owner@acme.example")
    page.fill("input[name=password]", "wrong password here")
    page.click("button[type=submit]")
    assert "Incorrect e-mail address or password" in page.text_content(".error")
    shot(page, "signin")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/$"))

    # Create a sandbox key with two scopes and an allow list, validated inline.
    page.goto(f"{stack.portal}/live/keys")
    assert page.text_content("[data-testid=env]") == "LIVE"
    page.click("[data-testid=env-switch]")
    page.wait_for_url(re.compile(r"/sandbox/keys$"))
    assert "SANDBOX" in page.text_content("[data-testid=env]")
    page.fill("input[name=name]", "checkout")
    page.check("input[value='account:read']")
    page.check("input[value='hotels:read']")
    page.fill("textarea[name=allowed_sources]", "10.0.0.0/33")
    page.wait_for_selector("[data-testid=sources-check] .field-error")
    page.fill("textarea[name=allowed_sources]", "127.0.0.1/32\n::1")
    page.wait_for_selector("[data-testid=sources-check] .field-ok")
    shot(page, "keys")
    page.click("[data-testid=create-key] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    page.click("[data-testid=copy]")
    page.wait_for_selector("[data-testid=copy][data-copied=yes]")
    secret = page.text_content("[data-testid=secret]").strip()
    assert secret.startswith("svc_test_")
    shot(page, "key-created")
    assert edge_get(stack, secret).status_code == 200

    # The list never shows the secret again.
    page.goto(f"{stack.portal}/sandbox/keys")
    assert secret not in page.content()
    page.click("text=checkout")
    shot(page, "key")
    old_key_url = page.url

    # Rotate with the default 24 h (asked first): both work, the old one carries Sunset.
    page.click("[data-testid=rotate] button[type=submit]")
    shot(page, "key-rotate-confirm")
    page.click("[data-testid=confirm] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    new_secret = page.text_content("[data-testid=secret]").strip()
    assert new_secret != secret
    shot(page, "key-rotated")
    old = edge_get(stack, secret)
    assert old.status_code == 200 and "Sunset" in old.headers
    assert edge_get(stack, new_secret).status_code == 200

    # Revoke the old key in the portal (typed confirmation): refused at the edge within a second.
    page.goto(old_key_url)
    page.fill("[data-testid=revoke] input[name=reason]", "rotated out")
    page.fill("[data-testid=revoke] input[name=confirm]", "not the name")
    page.click("[data-testid=revoke] button[type=submit]")
    assert page.is_visible("[data-field=confirm]")
    page.fill("[data-testid=revoke] input[name=confirm]", "checkout")
    page.click("[data-testid=revoke] button[type=submit]")
    page.wait_for_selector("[data-testid=key-status]:has-text('revoked')")
    revoked_at = time.monotonic()
    while edge_get(stack, secret).status_code != 401:
        assert time.monotonic() - revoked_at < 1.0, "the edge still accepts the revoked key after 1 s"
        time.sleep(0.05)
    assert edge_get(stack, new_secret).status_code == 200

    # The audit trail names the portal user.
    page.goto(f"{stack.portal}/sandbox/audit?action=key.revoked")
    assert "owner@acme.example" in page.text_content("[data-testid=audit]")
    shot(page, "audit")

    # Register an endpoint at the HTTPS receiver; the description is shown as text, never run.
    page.goto(f"{stack.portal}/sandbox/webhooks")
    xss = '<img src=x onerror="document.body.dataset.pwned=1"><script>document.body.dataset.pwned=1</script>'
    page.fill("[data-testid=endpoint-form] input[name=url]", stack.receiver.url("/hooks"))
    page.fill("[data-testid=endpoint-form] input[name=description]", xss)
    page.check("[data-testid=endpoint-form] input[value='booking.confirmed']")
    page.click("[data-testid=endpoint-form] button[type=submit]")
    page.wait_for_selector("[data-testid=secret]")
    assert page.text_content("[data-testid=secret]").startswith("whsec_")
    assert page.text_content("[data-testid=description]") == xss
    assert page.locator("[data-testid=description] img").count() == 0
    assert page.evaluate("document.body.dataset.pwned") is None
    shot(page, "endpoint")
    page.goto(f"{stack.portal}/sandbox/webhooks")
    assert page.locator(".description img").count() == 0
    shot(page, "webhooks")
    page.click(f"text={stack.receiver.url('/hooks')}")

    # Edit the endpoint (description and a second event kind), then recover since a time (a bad time is
    # refused beside its field).
    form = "[data-testid=endpoint-form]"
    page.fill(f"{form} input[name=description]", "checkout hooks")
    page.check(f"{form} input[value='booking.cancelled']")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("[data-testid=description]:has-text('checkout hooks')")
    assert "booking.confirmed, booking.cancelled" in page.text_content("dl.facts")
    page.fill("[data-testid=recover] input[name=since]", "yesterday")
    page.click("[data-testid=recover] button")
    page.wait_for_selector("[data-field=since]")
    page.fill("[data-testid=recover] input[name=since]", time.strftime("%Y-%m-%dT00:00", time.gmtime()))
    page.click("[data-testid=recover] button")  # the dry run's count, then the confirmation
    page.click("[data-testid=confirm] button[type=submit]")
    page.wait_for_selector("[data-testid=description]:has-text('checkout hooks')")
    assert page.locator("[data-field=since]").count() == 0

    # Send a test: the attempt appears with the receiver's response; resend: a second one appears.
    page.click("[data-testid=send-test]")
    page.wait_for_selector(
        "[data-testid=attempt] [data-testid=response-status]:has-text('200')", timeout=15000
    )
    assert page.locator("[data-testid=attempt]").count() == 1
    url_before = page.url
    page.click("[data-testid=resend]")
    page.locator("[data-testid=attempt]").nth(1).wait_for(timeout=15000)
    assert page.url == url_before  # no reload
    shot(page, "delivery")
    page.goto(f"{stack.portal}/sandbox/deliveries")
    assert "webhook.test" in page.text_content("[data-testid=deliveries]")
    shot(page, "deliveries")
    page.goto(f"{stack.portal}/sandbox/audit?user_id=")
    audit = page.text_content("[data-testid=audit]")
    for action in ("webhook_endpoint.updated", "webhook_endpoint.recovered", "webhook_attempt.resent"):
        assert action in audit
    shot(page, "audit-webhooks")

    page.goto(f"{stack.portal}/sandbox/users")
    shot(page, "users")
    page.goto(f"{stack.portal}/sandbox/me")
    page.click("text=Set up an authenticator app")
    page.wait_for_selector("[data-testid=qr] svg")
    shot(page, "me")
    page.goto(f"{stack.portal}/sandbox/")
    assert "100% of 2" in page.inner_html("main")  # the test and its resend, both answered 200
    shot(page, "overview-sandbox")

    # A booking.confirmed event (the endpoint subscribes to it): the Events page lists it; its page shows
    # the payload as text and its delivery, whose page shows the event, the endpoint and the payload.
    with grpc.insecure_channel(stack.webhookd) as channel:
        published = wpb_grpc.WebhookServiceStub(channel).PublishEvent(
            wpb.PublishEventRequest(
                account_id=stack.account_id,
                environment=wpb.ENVIRONMENT_SANDBOX,
                type="booking.confirmed",
                state="confirmed",
                data=event_data("booking.confirmed", booking="bk_e2e", customerRef=xss),
            )
        )
    event_id = published.event.id
    page.goto(f"{stack.portal}/sandbox/")
    page.click("nav >> text=Events")
    page.wait_for_url(re.compile(r"/sandbox/events$"))
    assert page.text_content(f"[data-event-id={event_id}] [data-testid=event-kind]") == "booking.confirmed"
    page.select_option("select[name=kind]", "booking.confirmed")
    page.click("[data-testid=event-filters] button")
    page.wait_for_url(re.compile(r"kind=booking.confirmed"))
    assert page.locator("[data-testid=event-row]").count() == 1
    shot(page, "events")
    page.click(f"[data-event-id={event_id}] code")
    page.wait_for_url(re.compile(rf"/sandbox/events/{event_id}$"))
    payload = str(page.text_content("[data-testid=payload]"))
    assert f'\n  "id": "{event_id}",\n' in payload and '"booking": "bk_e2e"' in payload
    assert "<script>document.body.dataset.pwned=1</script>" in payload  # shown as text, never run
    assert page.locator("[data-testid=payload] img").count() == 0
    assert page.evaluate("document.body.dataset.pwned") is None
    assert page.text_content("[data-testid=livemode]") == "false"
    page.locator("[data-testid=event-delivery]").first.wait_for()
    shot(page, "event")
    page.click("[data-testid=event-delivery] a >> nth=0")
    page.wait_for_selector("[data-testid=delivery-status]")
    assert stack.receiver.url("/hooks") in page.text_content("[data-testid=delivery-endpoint]")
    assert "booking.confirmed" in page.text_content("[data-testid=delivery-event]")
    assert f'"id": "{event_id}"' in str(page.text_content("[data-testid=payload]"))
    # The response body is collapsed until asked for.
    page.locator("[data-testid=attempt]").first.wait_for(timeout=15000)
    assert not page.locator("[data-testid=response-body] >> nth=0").is_visible()
    page.click("[data-testid=response-body-details] summary >> nth=0")
    assert page.locator("[data-testid=response-body] >> nth=0").is_visible()
    context.close()


def test_roles_csrf_and_stale_sessions(browser: Any, stack: Stack) -> None:
    owner_ctx, owner = join(browser, stack, "admin2@acme.example", ipb.USER_ROLE_OWNER)
    owner.goto(f"{stack.portal}/sandbox/keys")
    owner.fill("input[name=name]", "batch")
    owner.check("input[value='hotels:read']")
    owner.click("[data-testid=create-key] button[type=submit]")
    owner.wait_for_selector("[data-testid=secret]")
    owner.goto(f"{stack.portal}/sandbox/keys")
    key_id = owner.get_attribute("tr[data-key-id]:has-text('batch')", "data-key-id")

    # CSRF: the same POST without the token is refused and changes nothing.
    base = stack.portal
    assert _post(owner, f"{base}/sandbox/keys", {"name": "nocsrf", "scopes": "hotels:read"}) == 403
    owner.goto(f"{base}/sandbox/keys")
    assert "nocsrf" not in owner.content()

    # A developer sees no revoke button, and the route answers 403.
    dev_ctx, dev = join(browser, stack, "dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    dev.goto(f"{base}/sandbox/keys/{key_id}")
    assert dev.locator("[data-testid=revoke]").count() == 0
    assert dev.locator("[data-testid=rotate]").count() == 0
    shot(dev, "key-developer")
    csrf = _csrf(dev)
    assert _post(dev, f"{base}/sandbox/keys/{key_id}/revoke", {"csrf": csrf, "confirm": "batch"}) == 403
    owner.goto(f"{base}/sandbox/keys/{key_id}")
    assert owner.text_content("[data-testid=key-status]") == "active"

    # A viewer gets no form to post, and every write route answers 403.
    viewer_ctx, viewer = join(browser, stack, "viewer@acme.example", ipb.USER_ROLE_VIEWER)
    for path in ("/sandbox/keys", "/sandbox/webhooks", "/sandbox/users"):
        viewer.goto(base + path)
        assert viewer.locator("main form[method=post]").count() == 0, path
    csrf = _csrf(viewer)
    for path, form in [
        ("/sandbox/keys", {"name": "v", "scopes": "hotels:read"}),
        (f"/sandbox/keys/{key_id}/rotate", {}),
        (f"/sandbox/keys/{key_id}/revoke", {"confirm": "batch"}),
        ("/sandbox/webhooks", {"url": "https://example.com/h", "events": "booking.confirmed"}),
        ("/sandbox/users/invite", {"email": "x@acme.example", "role": "owner"}),
    ]:
        assert _post(viewer, base + path, {"csrf": csrf, **form}) == 403, path
    resp = viewer.request.post(
        f"{base}/sandbox/keys", form={"csrf": csrf, "name": "v", "scopes": "hotels:read"}
    )
    assert "req_" in resp.text()  # the error page carries the request id
    viewer.goto(f"{base}/sandbox/keys/key_nonexistent0000000000000")
    shot(viewer, "error")
    assert viewer.text_content("[data-testid=request-id]").startswith("req_")

    # A stale session (signed out elsewhere) is refused: pages send to sign-in, posts get 401.
    cookies = dev_ctx.cookies()
    dev.click("text=Sign out")
    stale = browser.new_context()
    stale.add_cookies(cookies)
    page = stale.new_page()
    page.goto(f"{base}/sandbox/keys")
    assert page.url.endswith("/signin")
    token = next(c["value"] for c in cookies if c["name"] == "portal_csrf")
    assert token
    assert (
        int(page.request.post(f"{base}/sandbox/webhooks", form={"csrf": "x"}, max_redirects=0).status) == 401
    )
    for ctx in (stale, viewer_ctx, dev_ctx, owner_ctx):
        ctx.close()


def test_security_headers(stack: Stack) -> None:
    resp = httpx.get(f"{stack.portal}/signin", timeout=5)
    assert resp.status_code == 200
    csp = resp.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"]
    cookie = resp.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie
    assert "<script>" not in resp.text and "onclick" not in resp.text
    htmx = httpx.get(f"{stack.portal}/static/htmx.min.js", timeout=5)
    assert htmx.status_code == 200 and "htmx" in htmx.text[:2000]
    metrics = httpx.get(stack.portal_metrics, timeout=5).text
    assert 'portal_request_seconds_count{route="/signin",status="200"}' in metrics


def test_invitation_by_mail_and_totp_sign_in(browser: Any, stack: Stack) -> None:
    owner_ctx, owner = join(browser, stack, "boss@acme.example", ipb.USER_ROLE_OWNER)
    owner.goto(f"{stack.portal}/live/users")
    owner.fill("main input[name=email]", "newdev@acme.example")
    owner.select_option("main select[name=role] >> nth=-1", "developer")
    owner.click("text=Send invitation")
    assert "Invitation sent to newdev@acme.example" in owner.text_content("[data-testid=notice]")
    deadline = time.monotonic() + 10
    while not any(m["To"] == "newdev@acme.example" for m in stack.inbox.messages):
        assert time.monotonic() < deadline, "no invitation e-mail"
        time.sleep(0.05)
    mail = next(m for m in stack.inbox.messages if m["To"] == "newdev@acme.example")
    found = re.search(r"(http://\S+/invite/inv_\S+)", mail.get_content())
    assert found is not None, "no invitation link in the e-mail"
    link = found.group(1)

    newcomer = browser.new_context()
    page = newcomer.new_page()
    page.goto(link)
    assert "newdev@acme.example" in str(page.text_content("[data-testid=invited-email]"))
    page.fill("input[name=password]", "short")
    page.click("button[type=submit]")
    assert "at least 12 characters" in page.text_content("[data-field=password]")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/$"))
    assert "newdev@acme.example (developer)" in page.text_content("nav")
    page.goto(link)  # the link works once
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    assert "not valid" in page.text_content("[data-field=token]")

    # TOTP: enrol from the QR page (the setup key is shown beside it), then sign-in asks for the code.
    totp = enrol_totp(page, stack)
    page.click("text=Sign out")
    page.fill("input[name=email]", "newdev@acme.example")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("input[name=totp_code]")
    shot(page, "signin-totp")
    page.fill("input[name=password]", PASSWORD)
    code = totp.at(time.time() + 30)  # the next step: the enrolment already used the current one
    page.fill("input[name=totp_code]", code)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/$"))

    # The owner makes TOTP required for owners and admins: without it, the owner may now only enrol.
    owner.goto(f"{stack.portal}/live/users")
    owner.check("[data-testid=security] input[name=require_totp]")
    owner.click("[data-testid=security] button")
    owner.wait_for_selector("[data-testid=enrolment-required]")
    owner.goto(f"{stack.portal}/live/keys")
    assert owner.url.endswith("/live/me")
    shot(owner, "me-enrolment-required")
    assert (
        _post(
            owner, f"{stack.portal}/live/keys", {"csrf": _csrf(owner), "name": "x", "scopes": "hotels:read"}
        )
        == 403
    )
    page.goto(f"{stack.portal}/live/keys")  # a developer is not held by the rule
    assert page.url.endswith("/live/keys")
    # The developer turns TOTP off again, entering its password once more.
    page.goto(f"{stack.portal}/live/me")
    page.fill("[data-testid=totp-remove] input[name=totp_password]", "not the password")
    page.click("[data-testid=totp-remove] button")
    assert "not your current password" in page.text_content("[data-field=totp_password]")
    page.fill("[data-testid=totp-remove] input[name=totp_password]", PASSWORD)
    page.click("[data-testid=totp-remove] button")
    page.wait_for_selector("text=Two-factor sign-in: off")
    newcomer.close()
    owner_ctx.close()


def test_portal_stops_gracefully_on_sigterm(tmp_path: pathlib.Path) -> None:
    portal = ServiceProcess(
        "portal",
        [
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "",
            "--authsvc",
            "127.0.0.1:9",
            "--webhookd",
            "127.0.0.1:9",
        ],
    ).start(tmp_path / "portal.log")
    assert httpx.get(f"{portal.ports['url']}/healthz", timeout=5).json() == {"status": "ok"}
    assert portal.terminate() == 0
    assert '"msg": "portal stopping"' in portal.logs()


def test_no_portal_secret_is_found_in_any_file_log_or_the_audit_trail(browser: Any, stack: Stack) -> None:
    """Session tokens, the invite token, the TOTP seed, the passwords, and the API key and signing
    secret the portal showed, of a real portal run are nowhere at rest: not in any database file
    (with its -wal/-shm), any process's log, the audit trail or a page of it; only the column that
    owns each holds its hash or sealed form."""
    email = "atrest@acme.example"
    first, second = (f"passphrase {secrets.token_hex(8)} {n}" for n in ("one", "two"))
    link = invite(stack, email, ipb.USER_ROLE_OWNER)
    invite_token = link.rsplit("/", 1)[1]
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.fill("input[name=password]", first)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/(me)?$"))  # me: when the account requires TOTP of owners

    def session() -> str:
        return str(next(c["value"] for c in context.cookies() if c["name"] == "portal_session"))

    sessions = [session()]
    totp = enrol_totp(page, stack)
    page.fill("input[name=current_password]", first)
    page.fill("input[name=new_password]", second)
    page.click("text=Change password")
    page.wait_for_selector("text=Two-factor sign-in: on")
    sessions.append(session())
    assert sessions[1] != sessions[0]

    # Refusals carrying a secret: the used invite link, the replaced session, a sign-in still missing
    # its second factor.
    again = browser.new_context().new_page()
    again.goto(link)
    again.fill("input[name=password]", second)
    again.click("button[type=submit]")
    assert "not valid" in again.text_content("[data-field=token]")
    again.context.close()
    stale = httpx.get(f"{stack.portal}/live/keys", cookies={"portal_session": sessions[0]}, timeout=5)
    assert stale.status_code in (302, 303) and stale.headers["location"].endswith("/signin")
    page.click("text=Sign out")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", second)
    page.click("button[type=submit]")
    page.wait_for_selector("input[name=totp_code]")
    page.fill("input[name=password]", second)
    page.fill("input[name=totp_code]", totp.at(time.time() + 30))
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/$"))
    sessions.append(session())
    # The secrets the portal shows once pass through it too: an API key and a signing secret.
    page.goto(f"{stack.portal}/sandbox/keys")
    page.fill("input[name=name]", "at rest")
    page.check("input[value='hotels:read']")
    page.click("[data-testid=create-key] button[type=submit]")
    api_key = page.text_content("[data-testid=secret]").strip()
    page.goto(f"{stack.portal}/sandbox/webhooks")
    page.fill("[data-testid=endpoint-form] input[name=url]", stack.receiver.url("/at-rest"))
    page.check("[data-testid=endpoint-form] input[value='booking.confirmed']")
    page.click("[data-testid=endpoint-form] button[type=submit]")
    signing_secret = page.text_content("[data-testid=secret]").strip()
    assert api_key.startswith("svc_test_") and signing_secret.startswith("whsec_")
    page.goto(f"{stack.portal}/live/audit")
    trail = page.content().encode() + _audit_trail(stack)
    context.close()

    issued = {"session token": sessions, "invite token": [invite_token], "TOTP seed": [totp.secret]}
    issued |= {"password": [first, second], "API key": [api_key], "signing secret": [signing_secret]}
    files = [p for p in stack.tmp.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"authsvc.db", "authsvc.db-wal", "authsvc.log", "portal.log", "edge.log"} <= names, names
    everything = [(p.name, p.read_bytes()) for p in files] + [("the audit trail", trail)]
    # The owning columns are read too: each session's hash is there, so the search sees the rows.
    authsvc_db = b"".join(data for name, data in everything if name.startswith("authsvc.db"))
    for token in sessions:
        assert hashlib.sha256(token.encode()).hexdigest().encode() in authsvc_db
    for what, values in issued.items():
        for value in values:
            for form in _forms(value):
                for name, data in everything:
                    assert form not in data, f"a {what} ({form[:8]!r}...) is readable in {name}"
