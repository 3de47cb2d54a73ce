"""The portal over real HTTP (httpx) against a real authsvc and webhookd on loopback, all in this process:
CSRF tokens bound to the server's key and the session, the delivery log's filters, and webhook
operations in the audit trail. The browser journey is tests/e2e/test_portal_browser.py."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import html
import json
import logging
import pathlib
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from sanic import Sanic

from authsvc._server import run_server as run_authsvc
from portal.app import PAGE_SIZE, PortalConfig, create_app
from portal.web import CSRF_COOKIE, SESSION_COOKIE
from svckit.webserver import start
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config
from webhookd._server import run_server as run_webhookd
from webhookd.testing import Receiver

PASSWORD = "a long enough passphrase"
OPS = apb.Actor(user="ops:test")


@dataclass
class Stack:
    url: str
    account_id: str
    auth: auth_pb2_grpc.AuthServiceStub
    ids: identity_pb2_grpc.IdentityServiceStub
    hooks: webhooks_pb2_grpc.WebhookServiceStub

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=30)

    async def join(self, email: str, role: ipb.UserRole.ValueType = ipb.USER_ROLE_OWNER) -> httpx.AsyncClient:
        """A client signed in as a new user of ``role``, through the invitation page."""
        made = await self.ids.CreateInvite(
            ipb.CreateInviteRequest(account_id=self.account_id, email=email, role=role, actor=OPS)
        )
        client = self.client()
        form = await client.get(f"/invite/{made.token}")
        accepted = await client.post(
            f"/invite/{made.token}", data={"csrf": csrf_of(form.text), "password": PASSWORD}
        )
        assert accepted.status_code == 303, accepted.text
        return client


@pytest.fixture
async def stack(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    # Sanic rewrites its own request reader when an app starts; test mode lets a second app of this
    # process start from the original again.
    monkeypatch.setattr(Sanic, "test_mode", True)
    authsvc = await run_authsvc("127.0.0.1:0", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    webhookd = await run_webhookd(
        Config(
            database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
        ),
    )
    config = PortalConfig(
        authsvc=f"127.0.0.1:{authsvc.port}", webhookd=f"127.0.0.1:{webhookd.port}", csrf_key=b"s" * 32
    )
    running = await start(create_app(config, name=f"portal_{uuid.uuid4().hex[:8]}"), ["127.0.0.1:0"])
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{authsvc.port}") as a,
            grpc.aio.insecure_channel(f"127.0.0.1:{webhookd.port}") as w,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(a)
            account = await auth.CreateAccount(apb.CreateAccountRequest(name="Acme", actor=OPS))
            yield Stack(
                f"http://127.0.0.1:{running.ports[0]}",
                account.account.id,
                auth,
                identity_pb2_grpc.IdentityServiceStub(a),
                webhooks_pb2_grpc.WebhookServiceStub(w),
            )
    finally:
        await running.stop(1)
        await webhookd.stop(0)
        await authsvc.stop(0)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(None).start()
    yield r
    r.stop()


async def _key_names(client: httpx.AsyncClient) -> str:
    return (await client.get("/sandbox/keys")).text


async def test_csrf_token_is_bound_to_the_session(stack: Stack) -> None:
    alice = await stack.join("alice@acme.example")
    bob = await stack.join("bob@acme.example")
    alice_token = csrf_of((await alice.get("/sandbox/keys")).text)
    bob_token = csrf_of((await bob.get("/sandbox/keys")).text)
    assert alice_token != bob_token

    # Bob's page, Alice's token (and even Alice's CSRF cookie): refused, nothing created.
    bob.cookies.set(CSRF_COOKIE, alice.cookies.get(CSRF_COOKIE) or "x")
    sent = await bob.post(
        "/sandbox/keys", data={"csrf": alice_token, "name": "forged", "scopes": "hotels:read"}
    )
    assert sent.status_code == 403 and "req_" in sent.text
    assert "forged" not in await _key_names(bob)
    made = await bob.post("/sandbox/keys", data={"csrf": bob_token, "name": "real", "scopes": "hotels:read"})
    # Post/Redirect/Get: the secret is on the page the POST redirects to.
    assert made.status_code == 303
    assert "svc_test_" in (await bob.get(made.headers["location"])).text

    # A new session (sign out, sign in) has a new token; the old session's token no longer works.
    await alice.post("/signout", data={"csrf": alice_token})
    signin = await alice.get("/signin")
    again = await alice.post(
        "/signin",
        data={"csrf": csrf_of(signin.text), "email": "alice@acme.example", "password": PASSWORD},
    )
    assert again.status_code == 303
    new_token = csrf_of((await alice.get("/sandbox/keys")).text)
    assert new_token != alice_token
    stale = await alice.post(
        "/sandbox/keys", data={"csrf": alice_token, "name": "stale", "scopes": "hotels:read"}
    )
    assert stale.status_code == 403
    assert "stale" not in await _key_names(alice)
    for client in (alice, bob):
        await client.aclose()


async def test_signed_out_forms_need_a_token_signed_by_the_portal(stack: Stack) -> None:
    await (await stack.join("carol@acme.example")).aclose()
    async with stack.client() as browser:
        # Forged: a cookie the attacker chose and its HMAC under the old constant (no server secret).
        browser.cookies.set(CSRF_COOKIE, "attacker-chosen")
        forged = hmac.new(b"attacker-chosen", b"portal-csrf", hashlib.sha256).hexdigest()
        form = {"email": "carol@acme.example", "password": PASSWORD}
        refused = await browser.post("/signin", data={"csrf": forged, **form})
        assert refused.status_code == 403 and SESSION_COOKIE not in refused.cookies
        # The same cookie with a token the portal signed for another browser's nonce: refused.
        async with stack.client() as other:
            other_token = csrf_of((await other.get("/signin")).text)
        refused = await browser.post("/signin", data={"csrf": other_token, **form})
        assert refused.status_code == 403 and SESSION_COOKIE not in refused.cookies

    # The portal's own signed-out token (for this browser's nonce cookie) works.
    async with stack.client() as browser:
        page = await browser.get("/signin")
        assert browser.cookies.get(CSRF_COOKIE)
        ok = await browser.post("/signin", data={"csrf": csrf_of(page.text), **form})
        assert ok.status_code == 303 and ok.cookies.get(SESSION_COOKIE)
        # A signed-out token is not a signed-in one.
        refused = await browser.post(
            "/sandbox/keys", data={"csrf": csrf_of(page.text), "name": "x", "scopes": "hotels:read"}
        )
        assert refused.status_code == 403


async def test_delivery_log_filters_by_event_kind_in_webhookd(stack: Stack) -> None:
    await stack.hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=stack.account_id,
            environment=wpb.ENVIRONMENT_SANDBOX,
            url="http://127.0.0.1:9/hooks",
            events=["booking.confirmed", "booking.cancelled"],
        )
    )
    # A page and two more of each kind, interleaved (nothing listens there: they stay undelivered).
    for i in range(2 * PAGE_SIZE + 4):
        await stack.hooks.PublishEvent(
            wpb.PublishEventRequest(
                account_id=stack.account_id,
                environment=wpb.ENVIRONMENT_SANDBOX,
                type="booking.cancelled" if i % 2 else "booking.confirmed",
                state="x",
            )
        )
    dora = await stack.join("dora@acme.example", ipb.USER_ROLE_VIEWER)
    first = await dora.get("/sandbox/deliveries", params={"event_kind": "booking.cancelled"})
    assert first.status_code == 200
    assert _rows(first.text) == ["booking.cancelled"] * PAGE_SIZE  # a whole page of matches
    second = await dora.get("/sandbox/deliveries" + _next_page(first.text))
    assert _rows(second.text) == ["booking.cancelled"] * 2  # the rest, none twice
    assert _next_page(second.text) == ""
    unfiltered = await dora.get("/sandbox/deliveries")
    assert sorted(set(_rows(unfiltered.text))) == ["booking.cancelled", "booking.confirmed"]
    refused = await dora.get("/sandbox/deliveries", params={"event_kind": "booking.nope"})
    assert refused.status_code == 400 and "unknown event kind" in refused.text

    await dora.aclose()


def _rows(page: str) -> list[str]:
    """The event kinds of the delivery log's rows, in order."""
    return re.findall(r"<td>([a-z_.]+) <code>evt_", page)


def _next_page(page: str) -> str:
    """The query string of the "Next page" link ("" when there is none)."""
    found = re.search(r'href="(\?[^"]*)" data-testid="next-page"', page)
    return html.unescape(found[1]) if found else ""


WEBHOOK_ACTIONS = [
    "webhook_endpoint.created",
    "webhook_endpoint.updated",
    "webhook_endpoint.secret_rotated",
    "webhook_endpoint.enabled",
    "webhook_endpoint.recovered",
    "webhook_endpoint.test_sent",
    "webhook_attempt.resent",
    "webhook_endpoint.deleted",
]


async def test_webhook_operations_are_in_the_audit_trail_with_the_portal_user(
    stack: Stack, receiver: Receiver
) -> None:
    dev = await stack.join("dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    me = await stack.ids.GetSession(ipb.GetSessionRequest(session_token=dev.cookies[SESSION_COOKIE]))
    token = csrf_of((await dev.get("/sandbox/webhooks")).text)
    made = await dev.post(
        "/sandbox/webhooks",
        data={"csrf": token, "url": receiver.url("/h"), "events": "booking.confirmed", "description": "one"},
    )
    assert made.status_code == 303
    shown = await dev.get(made.headers["location"])
    secrets = re.findall(r"whsec_[A-Za-z0-9+/=]+", shown.text)
    endpoint = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)/", made.headers["location"])[1]  # type: ignore[index]
    base = f"/sandbox/webhooks/{endpoint}"
    edited = await dev.post(
        f"{base}/edit",
        data={
            "csrf": token,
            "url": receiver.url("/h"),
            "events": ["booking.confirmed", "booking.cancelled"],
            "description": "two",
        },
    )
    assert edited.status_code == 303
    rotated = await dev.post(f"{base}/rotate", data={"csrf": token, "overlap_hours": "24"})
    assert rotated.status_code == 303
    secrets += re.findall(r"whsec_[A-Za-z0-9+/=]+", (await dev.get(rotated.headers["location"])).text)
    assert len(secrets) == 2
    for action in ("enable", "recover"):
        assert (await dev.post(f"{base}/{action}", data={"csrf": token})).status_code == 303
    sent = await dev.post(f"{base}/test", data={"csrf": token})
    assert sent.status_code == 303
    await receiver.wait_for(1)
    attempt = ""
    for _ in range(200):
        page = (await dev.get(sent.headers["location"])).text
        found = re.search(r'data-attempt-id="(att_[A-Za-z0-9]+)"', page)
        if found:
            attempt = found[1]
            break
        await asyncio.sleep(0.05)
    resent = await dev.post(
        f"/sandbox/attempts/{attempt}/resend", headers={"X-CSRF-Token": token, "HX-Request": "true"}
    )
    assert resent.status_code == 202
    assert (await dev.post(f"{base}/delete", data={"csrf": token})).status_code == 303

    # Every operation, in order, in the signed-in user's name; never a secret.
    trail = await stack.auth.ListAuditEvents(
        apb.ListAuditEventsRequest(account_id=stack.account_id, actor_user_id=me.user.id)
    )
    webhook_events = [e for e in trail.events if e.action.startswith("webhook_")]
    assert [e.action for e in webhook_events] == WEBHOOK_ACTIONS
    for e in webhook_events:
        assert (e.actor.user, e.actor.user_id, e.actor.source_address) == (
            me.user.email,
            me.user.id,
            "127.0.0.1",
        )
        assert e.after["endpoint_id"] == endpoint and e.after["environment"] == "sandbox"
    updated = webhook_events[1]
    assert dict(updated.before) == {"description": "one", "events": ["booking.confirmed"]}
    assert dict(updated.after)["description"] == "two"
    assert all(secret not in str(trail.events) for secret in secrets)

    # The audit page shows them, newest first, filtered by user and by action.
    page = (await dev.get("/sandbox/audit", params={"user_id": me.user.id})).text
    assert re.findall(r'data-action="(webhook_[a-z_.]+)"', page) == WEBHOOK_ACTIONS[::-1]
    assert all(secret not in page for secret in secrets)
    rotations = (await dev.get("/sandbox/audit", params={"action": "webhook_endpoint.secret_rotated"})).text
    assert re.findall(r'data-action="([a-z_.]+)"', rotations) == ["webhook_endpoint.secret_rotated"]
    assert "dev@acme.example" in rotations and "<dt>overlap_seconds</dt><dd>86400</dd>" in rotations
    await dev.aclose()


def _audit_rows(page: str) -> list[tuple[str, str]]:
    """(action, key id) of the audit page's rows, in order."""
    return re.findall(r'<tr data-action="([a-z_.]+)"><td>[^<]*</td><td>[a-z_.]+</td>\n<td>([^<]*)</td>', page)


async def test_audit_trail_opens_newest_first_and_pages_back_in_time(stack: Stack) -> None:
    owner = await stack.join("audit-owner@acme.example")
    made = []
    for i in range(PAGE_SIZE + 3):
        created = await stack.auth.CreateKey(
            apb.CreateKeyRequest(
                account_id=stack.account_id,
                name=f"k{i}",
                environment=apb.ENVIRONMENT_SANDBOX,
                scopes=["hotels:read"],
                actor=OPS,
            )
        )
        made.append(created.key.id)
    newest = made[-1]
    await stack.auth.RevokeKey(apb.RevokeKeyRequest(key_id=newest, reason="done", actor=OPS))
    first = (await owner.get("/sandbox/audit")).text
    rows = _audit_rows(first)
    assert len(rows) == PAGE_SIZE
    # The first row is the newest event: the revocation just made, then the keys newest first.
    assert rows[0] == ("key.revoked", newest)
    assert rows[1:] == [("key.created", k) for k in made[::-1][: PAGE_SIZE - 1]]
    # The next page goes on back in time, to the account's creation; nothing repeated or skipped.
    second = (await owner.get("/sandbox/audit" + _next_page(first))).text
    older = _audit_rows(second)
    assert [k for _, k in older if k] == made[::-1][PAGE_SIZE - 1 :]
    actions = re.findall(r'data-action="([a-z_.]+)"', second)
    assert "account.created" in actions and _next_page(second) == ""
    await owner.aclose()


async def test_a_read_only_accounts_overview_says_how_it_is_lifted(stack: Stack) -> None:
    viewer = await stack.join("viewer@acme.example", ipb.USER_ROLE_VIEWER)
    assert 'data-testid="read-only"' not in (await viewer.get("/sandbox/")).text
    await stack.auth.SetAccountStatus(
        apb.SetAccountStatusRequest(
            account_id=stack.account_id, status=apb.ACCOUNT_STATUS_READ_ONLY, actor=OPS
        )
    )
    page = (await viewer.get("/sandbox/")).text
    said = html.unescape(re.search(r'<p data-testid="read-only">(.*?)</p>', page, re.S)[1])  # type: ignore[index]
    for fact in (
        "settlement charge is unpaid",
        "Pay the open settlement invoice",
        "billing records the payment",
    ):
        assert fact in said
    assert "Contact support" in said and "account_read_only" in said
    await stack.auth.SetAccountStatus(
        apb.SetAccountStatusRequest(account_id=stack.account_id, status=apb.ACCOUNT_STATUS_ACTIVE, actor=OPS)
    )
    assert 'data-testid="read-only"' not in (await viewer.get("/sandbox/")).text
    await viewer.aclose()


# -- Post/Redirect/Get, one-time flashes, pages --------------------------------------------------------


async def test_notifications_form_adds_and_removes_extra_addresses(stack: Stack) -> None:
    admin = await stack.join("notify-admin@acme.example", ipb.USER_ROLE_ADMIN)
    await (await stack.join("notify-owner@acme.example")).aclose()
    page = await admin.get("/live/notifications")
    assert page.status_code == 200 and 'href="/live/notifications"' in page.text
    # The owners and admins are listed, read-only (no form of theirs on the page).
    owners = re.search(r'data-testid="portal-recipients">(.*?)</table>', page.text, re.S)
    assert owners and "notify-owner@acme.example" in owners[1] and "notify-admin@acme.example" in owners[1]
    assert "<form" not in owners[1]
    token = csrf_of(page.text)

    added = await admin.post("/live/notifications/add", data={"csrf": token, "email": "Alerts@Acme.example"})
    assert added.status_code == 303 and added.headers["location"] == "/live/notifications"
    shown = await admin.get("/live/notifications")
    assert 'data-testid="notice">Alerts@Acme.example now receives alert e-mails.' in shown.text
    assert "now receives" not in (await admin.get("/live/notifications")).text  # once

    # Refused: beside the field, with what was typed, and nothing changed.
    for typed, problem in (
        ("not-an-address", "not-an-address is not an e-mail address"),
        ("alerts@acme.example", "Alerts@Acme.example already receives alert e-mails"),
        ("notify-owner@acme.example", "already receives alert e-mails as a portal owner or admin"),
    ):
        refused = await admin.post("/live/notifications/add", data={"csrf": token, "email": typed})
        assert refused.status_code == 400, typed
        assert re.search(
            rf'<span class="field-error" data-field="email">[^<]*{re.escape(problem)}', refused.text
        )
        assert f'value="{typed}"' in refused.text
    got = await stack.auth.GetAccount(apb.GetAccountRequest(account_id=stack.account_id))
    assert list(got.account.admin_emails) == ["Alerts@Acme.example"]

    removed = await admin.post(
        "/live/notifications/remove", data={"csrf": token, "email": "alerts@acme.example"}
    )
    assert removed.status_code == 303
    assert (
        "Alerts@Acme.example no longer receives alert e-mails."
        in (await admin.get("/live/notifications")).text
    )
    got = await stack.auth.GetAccount(apb.GetAccountRequest(account_id=stack.account_id))
    assert list(got.account.admin_emails) == []
    await admin.aclose()

    # A developer neither (the page is for owners and admins).
    dev = await stack.join("notify-dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    assert (await dev.get("/live/notifications")).status_code == 403
    assert 'href="/live/notifications"' not in (await dev.get("/live/keys")).text
    await dev.aclose()


def _set_cookies(resp: httpx.Response) -> dict[str, str]:
    """The Set-Cookie headers of ``resp``, by cookie name (the whole header, lower-case)."""
    return {h.split("=", 1)[0]: h.lower() for h in resp.headers.get_list("set-cookie")}


async def _create_key(client: httpx.AsyncClient, name: str, scopes: str = "hotels:read") -> httpx.Response:
    token = csrf_of((await client.get("/sandbox/keys")).text)
    return await client.post("/sandbox/keys", data={"csrf": token, "name": name, "scopes": scopes})


async def test_every_state_changing_form_answers_303_to_a_page(stack: Stack, receiver: Receiver) -> None:
    owner = await stack.join("prg-owner@acme.example")
    other = await stack.join("prg-dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    other_id = (
        await stack.ids.GetSession(ipb.GetSessionRequest(session_token=other.cookies[SESSION_COOKIE]))
    ).user.id
    token = csrf_of((await owner.get("/sandbox/keys")).text)

    async def post(path: str, **form: str | list[str]) -> str:
        sent = await owner.post(path, data={"csrf": token, **form})
        assert sent.status_code == 303, (path, sent.status_code, sent.text[:300])
        to = sent.headers["location"]
        assert "svc_" not in to and "whsec_" not in to  # never a secret in a URL
        page = await owner.get(to)
        assert page.status_code == 200, (path, to)
        return page.text

    made = await owner.post("/sandbox/keys", data={"csrf": token, "name": "prg", "scopes": "hotels:read"})
    assert made.status_code == 303
    key_id = re.search(r"/sandbox/keys/(key_[A-Za-z0-9]+)/secret$", made.headers["location"])[1]  # type: ignore[index]
    await owner.get(made.headers["location"])
    assert "Key saved" in await post(f"/sandbox/keys/{key_id}/edit", name="prg2", scopes=["hotels:read"])
    assert "API key rotated" in await post(f"/sandbox/keys/{key_id}/rotate", grace_hours="1")
    assert "Key revoked" in await post(f"/sandbox/keys/{key_id}/revoke", confirm="prg2")

    page = await post("/sandbox/webhooks", url=receiver.url("/p"), events="booking.confirmed")
    endpoint = re.search(r"/sandbox/webhooks/(we_[A-Za-z0-9]+)/edit", page)[1]  # type: ignore[index]
    base = f"/sandbox/webhooks/{endpoint}"
    assert "Endpoint saved" in await post(
        f"{base}/edit", url=receiver.url("/p"), events="booking.confirmed", description="d"
    )
    assert "Endpoint enabled" in await post(f"{base}/enable")
    assert re.search(r"\d+ deliver(y|ies) queued", await post(f"{base}/recover"))
    assert "Test event sent" in await post(f"{base}/test")
    assert "Signing secret rotated" in await post(f"{base}/rotate", overlap_hours="0")
    assert "deleted" in await post(f"{base}/delete")

    assert "Role changed" in await post(f"/sandbox/users/{other_id}/role", role="viewer")
    invited = await post("/sandbox/users/invite", email="prg-new@acme.example", role="viewer")
    assert "this link (it works once)" in invited
    assert "User removed" in await post(f"/sandbox/users/{other_id}/remove")
    assert "Sign-in rules saved" in await post("/sandbox/users/security")
    assert "now receives alert e-mails" in await post("/sandbox/notifications/add", email="prg@ops.example")
    assert "no longer receives alert e-mails" in await post(
        "/sandbox/notifications/remove", email="prg@ops.example"
    )
    # A new session comes with the password change: the notice is sealed for that one.
    changed = await post("/sandbox/me/password", current_password=PASSWORD, new_password=PASSWORD + "!")
    assert "Password changed" in changed
    await owner.aclose()
    await other.aclose()


async def test_a_new_keys_secret_is_a_one_time_sealed_flash(stack: Stack) -> None:
    alice = await stack.join("flash-alice@acme.example")
    made = await _create_key(alice, "flash")
    assert made.status_code == 303
    to = made.headers["location"]
    key_id = to.split("/")[3]
    assert re.fullmatch(r"/sandbox/keys/key_[A-Za-z0-9]+/secret", to)
    cookie = _set_cookies(made)["portal_once"]
    # HttpOnly, SameSite=Strict, this page's path only, 10 minutes; not Secure on http (the session
    # cookie is not either), and no secret readable in it.
    assert "httponly" in cookie and "samesite=strict" in cookie and f"path={to.lower()}" in cookie
    assert "max-age=600" in cookie and "secure" not in cookie.replace("samesite", "")
    assert "svc_" not in cookie
    sealed = alice.cookies.get("portal_once", path=to)
    assert sealed

    # Another session with Alice's sealed cookie: refused (nothing shown), and the cookie dropped.
    bob = await stack.join("flash-bob@acme.example")
    bob.cookies.set("portal_once", sealed, domain="127.0.0.1", path=to)
    stolen = await bob.get(to)
    assert stolen.status_code == 200 and 'data-testid="secret"' not in stolen.text
    assert "This secret was shown once" in stolen.text

    # Alice's own first GET shows it and deletes the cookie in that same answer; a reload does not.
    first = await alice.get(to)
    assert re.search(r'data-testid="secret">svc_test_', first.text)
    dropped = _set_cookies(first)["portal_once"]
    assert "max-age=0" in dropped and f"path={to.lower()}" in dropped
    again = await alice.get(to)
    assert 'data-testid="secret"' not in again.text
    assert "This secret was shown once. Rotate the key to get a new one." in again.text
    # One changed byte and the sealed cookie opens for nobody.
    tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    alice.cookies.set("portal_once", tampered, domain="127.0.0.1", path=to)
    assert 'data-testid="secret"' not in (await alice.get(to)).text

    # Exactly one key, one key.created.
    keys = await stack.auth.ListKeys(
        apb.ListKeysRequest(account_id=stack.account_id, environment=apb.ENVIRONMENT_SANDBOX)
    )
    assert [k.id for k in keys.keys if k.name == "flash"] == [key_id]
    for client in (alice, bob):
        await client.aclose()


async def test_flash_notice_is_shown_once_on_the_page_redirected_to(stack: Stack) -> None:
    owner = await stack.join("notice@acme.example")
    made = await _create_key(owner, "notice")
    key_page = made.headers["location"].removesuffix("/secret")
    token = csrf_of((await owner.get(key_page)).text)
    revoked = await owner.post(f"{key_page}/revoke", data={"csrf": token, "confirm": "notice"})
    assert revoked.status_code == 303 and revoked.headers["location"] == key_page
    cookie = _set_cookies(revoked)["portal_notice"]
    assert "httponly" in cookie and "samesite=strict" in cookie and f"path={key_page.lower()}" in cookie
    assert "Key revoked" in (await owner.get(key_page)).text
    assert "Key revoked" not in (await owner.get(key_page)).text
    await owner.aclose()


async def test_no_secret_shown_once_is_in_any_log_record(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    owner = await stack.join("logs@acme.example")
    caplog.set_level(logging.DEBUG)
    made = await _create_key(owner, "logged")
    shown = (await owner.get(made.headers["location"])).text
    secret = re.search(r'data-testid="secret">(svc_test_[^<]+)<', shown)[1]  # type: ignore[index]
    key_page = made.headers["location"].removesuffix("/secret")
    token = csrf_of((await owner.get(key_page)).text)
    rotated = await owner.post(f"{key_page}/rotate", data={"csrf": token, "grace_hours": "0"})
    new_secret = re.search(  # type: ignore[index]
        r'data-testid="secret">(svc_test_[^<]+)<', (await owner.get(rotated.headers["location"])).text
    )[1]
    records = [str(r.__dict__) + r.getMessage() for r in caplog.records]
    assert any("request" in r for r in records)  # the portal's request logs were captured
    for value in (secret, new_secret):
        assert all(value not in r for r in records)
    await owner.aclose()


async def test_unknown_urls_get_the_portals_own_404_and_there_is_a_favicon(stack: Stack) -> None:
    async with stack.client() as anonymous:
        for path in ("/no/such/page", "/live/no-such-page", "/favicon.ico.bak"):
            missing = await anonymous.get(path)
            assert missing.status_code == 404, path
            assert 'data-testid="request-id">req_' in missing.text
            assert "<script>" not in missing.text and "sanic" not in missing.text.lower()
            assert "default-src 'self'" in missing.headers["content-security-policy"]
        icon = await anonymous.get("/favicon.ico", follow_redirects=True)
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
        assert 'rel="icon"' in (await anonymous.get("/signin")).text


async def test_an_unexpected_error_is_the_portals_own_500_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Sanic, "test_mode", True)
    app = create_app(PortalConfig(authsvc="127.0.0.1:9", webhookd="127.0.0.1:9"), name="portal_boom")

    @app.get("/static/boom")  # public (no session needed): a /static/<name> path
    async def boom(request: object) -> None:
        raise RuntimeError("boom")

    running = await start(app, ["127.0.0.1:0"])
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.ports[0]}") as client:
            failed = await client.get("/static/boom")
    finally:
        await running.stop(1)
    assert failed.status_code == 500
    assert 'data-testid="request-id">req_' in failed.text and "boom" not in failed.text
    assert "<script>" not in failed.text and "default-src 'self'" in failed.headers["content-security-policy"]


# -- Events, a delivery's page, the sandbox clock --------------------------------------------------------


async def _publish(stack: Stack, kind: str, **data: str) -> wpb.Event:
    request = wpb.PublishEventRequest(
        account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, type=kind, state="s"
    )
    request.data.update(data)
    published: wpb.PublishEventResponse = await stack.hooks.PublishEvent(request)
    return published.event


async def _register(stack: Stack, url: str, *kinds: str) -> str:
    made: wpb.RegisterEndpointResponse = await stack.hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, url=url, events=kinds
        )
    )
    return made.endpoint.id


def _event_rows(page: str) -> list[tuple[str, str]]:
    """The events page's rows, in order: (event id, kind)."""
    return re.findall(
        r'data-event-id="(evt_[A-Za-z0-9]+)">.*?data-testid="event-kind">([a-z_.]+)<', page, re.S
    )


async def test_events_page_lists_filters_and_pages_newest_first(stack: Stack) -> None:
    # Nothing subscribed: events without deliveries.
    kinds = ["booking.confirmed" if i % 6 else "booking.cancelled" for i in range(34)]
    published = [await _publish(stack, kind) for kind in kinds]
    dora = await stack.join("events-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    first = await dora.get("/sandbox/events")
    assert first.status_code == 200
    assert 'href="/sandbox/events"' in first.text  # in the navigation
    newest = [(e.id, e.type) for e in reversed(published)]
    assert _event_rows(first.text) == newest[:PAGE_SIZE]
    second = await dora.get("/sandbox/events" + _next_page(first.text))
    assert _event_rows(second.text) == newest[PAGE_SIZE:]
    assert _next_page(second.text) == ""
    assert all(f'href="/sandbox/events/{e.id}"' in first.text + second.text for e in published)

    # The kind filter: a select of every kind, only that kind listed, and it carries to the next page.
    cancelled = await dora.get("/sandbox/events", params={"kind": "booking.cancelled"})
    assert _event_rows(cancelled.text) == [(i, k) for i, k in newest if k == "booking.cancelled"]
    assert "<option selected>booking.cancelled</option>" in cancelled.text
    assert "<option>apikey.revoked</option>" in cancelled.text
    confirmed = await dora.get("/sandbox/events", params={"kind": "booking.confirmed"})
    assert [k for _, k in _event_rows(confirmed.text)] == ["booking.confirmed"] * PAGE_SIZE
    assert "kind=booking.confirmed" in _next_page(confirmed.text)
    rest = await dora.get("/sandbox/events" + _next_page(confirmed.text))
    assert [k for _, k in _event_rows(rest.text)] == ["booking.confirmed"] * (28 - PAGE_SIZE)

    # A time range: none of these events is from before an hour ago.
    old = await dora.get("/sandbox/events", params={"until": "2020-01-01T00:00"})
    assert old.status_code == 200 and _event_rows(old.text) == []
    # Refusals beside their fields, over an empty list.
    refused = await dora.get("/sandbox/events", params={"kind": "booking.nope"})
    assert refused.status_code == 400 and 'data-field="types"' in refused.text
    assert "unknown event kind" in refused.text and _event_rows(refused.text) == []
    bad_time = await dora.get("/sandbox/events", params={"since": "yesterday"})
    assert bad_time.status_code == 400 and 'data-field="since"' in bad_time.text
    # Sandbox events are not live ones.
    assert _event_rows((await dora.get("/live/events")).text) == []
    await dora.aclose()


async def test_an_events_page_shows_its_payload_and_its_deliveries(stack: Stack, receiver: Receiver) -> None:
    endpoint = await _register(stack, receiver.url("/events"), "booking.confirmed")
    await _register(stack, "http://127.0.0.1:9/unused", "booking.cancelled")
    event = await _publish(stack, "booking.confirmed", booking_id="bk_1", note="<script>alert(1)</script>")
    await receiver.wait_for(1)
    dora = await stack.join("event-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    listed = await dora.get("/sandbox/events")
    assert f'href="/sandbox/events/{event.id}"' in listed.text

    page = await dora.get(f"/sandbox/events/{event.id}")
    assert page.status_code == 200
    assert 'data-testid="event-kind">booking.confirmed<' in page.text
    assert 'data-testid="event-state">s<' in page.text
    assert 'data-testid="livemode">false<' in page.text
    payload = html.unescape(re.search(r'data-testid="payload">(.*?)</pre>', page.text, re.S)[1])  # type: ignore[index]
    assert payload == json.dumps(json.loads(event.envelope_json), indent=2, ensure_ascii=False)
    assert f'\n  "id": "{event.id}",\n' in payload
    # Autoescaped: the payload's markup is text.
    assert (
        "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    )
    # Its one delivery (the booking.cancelled endpoint got none), linked to its page.
    deliveries = re.findall(r'href="/sandbox/deliveries/(msg_[A-Za-z0-9]+)"', page.text)
    assert len(deliveries) == 1
    assert f'href="/sandbox/webhooks/{endpoint}"' in page.text

    # Unknown, another environment's, or not an event id: the portal's 404.
    for path in ("/sandbox/events/evt_nosuchevent", f"/live/events/{event.id}"):
        missing = await dora.get(path)
        assert missing.status_code == 404, path
    await dora.aclose()


async def test_a_deliverys_page_shows_its_event_endpoint_status_payload_and_attempts_newest_first(
    stack: Stack, receiver: Receiver
) -> None:
    url = receiver.url("/delivery")
    endpoint = await _register(stack, url, "booking.confirmed")
    event = await _publish(stack, "booking.confirmed", booking_id="bk_2")
    await receiver.wait_for(1)
    dev = await stack.join("delivery-dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    listed = await dev.get(f"/sandbox/events/{event.id}")
    delivery = re.search(r'href="/sandbox/deliveries/(msg_[A-Za-z0-9]+)"', listed.text)[1]  # type: ignore[index]
    path = f"/sandbox/deliveries/{delivery}"
    page = ""
    for _ in range(200):
        page = (await dev.get(path)).text
        if 'data-testid="delivery-status">succeeded<' in page:
            break
        await asyncio.sleep(0.05)
    facts = re.search(r'data-testid="delivery-facts">(.*?)</dl>', page, re.S)
    assert facts, page
    assert f'<a href="/sandbox/events/{event.id}">booking.confirmed</a>' in facts[1]
    assert f'<a href="/sandbox/webhooks/{endpoint}">{url}</a>' in facts[1]
    assert 'data-testid="delivery-status">succeeded<' in facts[1]
    payload = html.unescape(re.search(r'data-testid="payload">(.*?)</pre>', page, re.S)[1])  # type: ignore[index]
    assert json.loads(payload) == json.loads(event.envelope_json) and "\n  " in payload
    # Response bodies are collapsed.
    collapsed = r'<details data-testid="response-body-details"><summary>[^<]*</summary><pre data-testid='
    assert re.search(collapsed + '"response-body">', page)

    # Two resends: three attempts, the newest first (the page and its htmx refresh alike).
    seen = re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', page)
    assert len(seen) == 1
    token = csrf_of(page)
    for n in (2, 3):
        resent = await dev.post(
            f"/sandbox/attempts/{seen[-1]}/resend", headers={"X-CSRF-Token": token, "HX-Request": "true"}
        )
        assert resent.status_code == 202
        made = seen
        for _ in range(200):
            made = re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', (await dev.get(path)).text)
            if len(made) == n:
                break
            await asyncio.sleep(0.05)
        # The new one on top, the others below as they were.
        assert len(made) == n and made[1:] == seen and made[0] not in seen
        seen = made
    page = (await dev.get(path)).text
    ordered = re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', page)
    fragment = (await dev.get(path, headers={"HX-Request": "true"})).text
    assert re.findall(r'data-attempt-id="(att_[A-Za-z0-9]+)"', fragment) == ordered
    stamps = re.findall(r"<dt>When</dt><dd>([^<]+)</dd>", page)
    assert stamps == sorted(stamps, reverse=True) and len(stamps) == 3

    # A test event's delivery: no event page (test events are not in the event log), said so.
    token = csrf_of((await dev.get(f"/sandbox/webhooks/{endpoint}")).text)
    sent = await dev.post(f"/sandbox/webhooks/{endpoint}/test", data={"csrf": token})
    test_page = (await dev.get(sent.headers["location"])).text
    for _ in range(200):
        if 'data-testid="delivery-facts"' in test_page:
            break
        await asyncio.sleep(0.05)
        test_page = (await dev.get(sent.headers["location"])).text
    assert "webhook.test" in test_page and 'data-testid="payload-missing"' in test_page
    assert 'href="/sandbox/events/' not in test_page
    await dev.aclose()


async def test_sandbox_clock_button_advances_the_schedule_and_says_what_is_due(stack: Stack) -> None:
    dev = await stack.join("clock-dev@acme.example", ipb.USER_ROLE_DEVELOPER)
    webhooks = await dev.get("/sandbox/webhooks")
    assert 'data-testid="sandbox-clock"' in webhooks.text and 'action="/sandbox/clock"' in webhooks.text
    for choice in ("1m", "5m", "30m", "2h", "6h", "24h"):
        assert f">{choice}</option>" in webhooks.text
    assert 'data-testid="sandbox-clock"' in (await dev.get("/sandbox/deliveries")).text
    # Never on live.
    for path in ("/live/webhooks", "/live/deliveries"):
        assert 'data-testid="sandbox-clock"' not in (await dev.get(path)).text
    token = csrf_of(webhooks.text)

    nothing = await dev.post("/sandbox/clock", data={"csrf": token, "by": "5m", "back": "webhooks"})
    assert nothing.status_code == 303 and nothing.headers["location"] == "/sandbox/webhooks"
    shown = await dev.get("/sandbox/webhooks")
    assert 'data-testid="notice">Sandbox clock advanced by 5m: 0 deliveries due now<' in shown.text
    assert "Sandbox clock advanced" not in (await dev.get("/sandbox/webhooks")).text  # once

    # A delivery whose first attempt failed waits a minute for its second: 2h brings it due now.
    await _register(stack, "http://127.0.0.1:9/down", "booking.confirmed")
    event = await _publish(stack, "booking.confirmed")
    for _ in range(200):
        got = await stack.hooks.ListDeliveries(
            wpb.ListDeliveriesRequest(
                account_id=stack.account_id, environment=wpb.ENVIRONMENT_SANDBOX, event_id=event.id
            )
        )
        if got.deliveries and got.deliveries[0].attempt_count == 1:
            break
        await asyncio.sleep(0.05)
    assert got.deliveries[0].status == wpb.DELIVERY_STATUS_PENDING
    advanced = await dev.post("/sandbox/clock", data={"csrf": token, "by": "2h", "back": "deliveries"})
    assert advanced.status_code == 303 and advanced.headers["location"] == "/sandbox/deliveries"
    shown = await dev.get("/sandbox/deliveries")
    assert 'data-testid="notice">Sandbox clock advanced by 2h: 1 delivery due now<' in shown.text

    # Refused: a span not offered (beside nothing: the error page), live (no such page), no token.
    assert (await dev.post("/sandbox/clock", data={"csrf": token, "by": "8d"})).status_code == 400
    live = await dev.post("/live/clock", data={"csrf": token, "by": "2h"})
    assert live.status_code == 404 and "Sandbox clock advanced" not in live.text
    assert (await dev.post("/sandbox/clock", data={"by": "2h"})).status_code == 403
    await dev.aclose()

    # A viewer neither sees the form nor may post it.
    viewer = await stack.join("clock-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    page = await viewer.get("/sandbox/webhooks")
    assert 'data-testid="sandbox-clock"' not in page.text
    refused = await viewer.post("/sandbox/clock", data={"csrf": csrf_of(page.text), "by": "2h"})
    assert refused.status_code == 403
    await viewer.aclose()


# -- public routes matched whole; refusals logged as counts ----------------------------------------------
async def _get_raw(client: httpx.AsyncClient, raw_path: bytes) -> httpx.Response:
    """GET with the path sent as written (httpx would resolve ``..`` itself)."""
    request = client.build_request("GET", "/")
    request.url = request.url.copy_with(raw_path=raw_path)
    return await client.send(request)


@pytest.mark.parametrize(
    "path",
    [b"/healthz/keys/key_x", b"/healthz/keys", b"/signinX", b"/static/../x", b"/static/a/b", b"/invite/a/b"],
)
async def test_a_path_only_starting_like_a_public_one_needs_a_session(stack: Stack, path: bytes) -> None:
    """The reproduction: /healthz/keys/key_x is /<env>/keys/<key_id> with env=healthz, and ran that page
    with no session (a 500). Signed out, it is sent to sign in (or is no page); the route never runs."""
    async with stack.client() as client:
        resp = await _get_raw(client, path)
    assert resp.status_code in (302, 303, 404), (path, resp.status_code, resp.text[:300])
    if resp.status_code != 404:
        assert resp.headers["location"] == "/signin"


async def test_public_routes_still_serve_signed_out_and_a_post_needs_its_token(stack: Stack) -> None:
    async with stack.client() as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/static/portal.css")).status_code == 200
        assert (await client.get("/favicon.ico")).status_code == 301
        assert (await client.get("/signin")).status_code == 200
        assert (await client.get("/static/nope.css")).status_code == 404
        revoke = await client.post("/healthz/keys/key_x/revoke", data={"csrf": "x"})
        assert revoke.status_code in (401, 403, 404), (
            revoke.status_code,
            revoke.text[:300],
        )  # never run, never 500
        forged = await client.post("/signin", data={"csrf": "forged", "email": "a@b.c", "password": "x"})
        assert forged.status_code == 403


async def test_a_flood_of_signed_out_requests_is_a_handful_of_log_lines(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "portal")
    async with stack.client() as client:
        for path in ("/healthz/keys/key_x", "/live/keys", "/nope") * 100:
            assert (await client.get(path)).status_code in (302, 404)
    records = [r for r in caplog.records if r.name == "portal"]
    per_request = [r for r in records if r.getMessage() == "request"]
    assert per_request == []
    summaries = [r for r in records if r.getMessage() == "refused requests"]
    assert 1 <= len(summaries) <= 10, len(summaries)
