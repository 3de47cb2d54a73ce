"""The portal's forms over real HTTP: Post/Redirect/Get, one-time sealed flashes and notices, the
Notifications form, and no secret shown once in any log record."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import logging
import re

import httpx
import pytest

from portal.web import SESSION_COOKIE
from tests.integration.portal_stack import PASSWORD, Stack, receiver, stack  # noqa: F401 (the fixtures)
from tests.support import csrf_of
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb
from webhookd.testing import Receiver

# -- Post/Redirect/Get, one-time flashes --------------------------------------------------------------


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


async def test_a_key_edit_with_a_number_out_of_range_is_a_400_beside_the_field(stack: Stack) -> None:
    """Issue 34: ``rate_limit=99999999999999999999`` answered 500 (past the proto's int32); every value the
    form cannot take is a 400 with the error beside the field, and the key is unchanged."""
    owner = await stack.join("range-owner@acme.example")
    made = await _create_key(owner, "ranged")
    key_id = re.search(r"/sandbox/keys/(key_[A-Za-z0-9]+)/secret$", made.headers["location"])[1]  # type: ignore[index]
    await owner.get(made.headers["location"])
    token = csrf_of((await owner.get(f"/sandbox/keys/{key_id}")).text)
    for value in ("99999999999999999999", "2147483648", "100001", "-1", "1e3", "\u00b2", "\u0661\u0662", "x"):
        sent = await owner.post(
            f"/sandbox/keys/{key_id}/edit",
            data={"csrf": token, "name": "ranged", "scopes": "hotels:read", "rate_limit": value},
        )
        assert sent.status_code == 400, (value, sent.status_code, sent.text[:300])
        assert 'class="field-error" data-field="rate_limit"' in sent.text, value
    key = await stack.auth.GetKey(apb.GetKeyRequest(key_id=key_id))
    assert key.key.rate_limit == 0
    await owner.aclose()


async def test_a_secret_cookie_replayed_in_its_session_shows_nothing(
    stack: Stack, receiver: Receiver
) -> None:
    """Issue 34: the one-time cookie was single-use only because browsers delete it: the same session
    sending it again within its 10 minutes saw the secret again. The portal now spends it at its first
    view: a new key's secret and a new endpoint's signing secret are each shown once, replay or not."""
    alice = await stack.join("replay@acme.example")
    made = await _create_key(alice, "replayed")
    to = made.headers["location"]
    sealed = alice.cookies.get("portal_once", path=to)
    assert sealed
    assert re.search(r'data-testid="secret">svc_test_', (await alice.get(to)).text)
    alice.cookies.set("portal_once", sealed, domain="127.0.0.1", path=to)  # the same cookie, again
    again = await alice.get(to)
    assert again.status_code == 200 and 'data-testid="secret"' not in again.text
    assert "This secret was shown once" in again.text

    token = csrf_of((await alice.get("/sandbox/webhooks")).text)
    created = await alice.post(
        "/sandbox/webhooks", data={"csrf": token, "url": receiver.url("/r"), "events": "booking.confirmed"}
    )
    assert created.status_code == 303
    page = created.headers["location"]
    sealed = alice.cookies.get("portal_once", path=page)
    assert sealed and "whsec_" in (await alice.get(page)).text
    alice.cookies.set("portal_once", sealed, domain="127.0.0.1", path=page)
    assert "whsec_" not in (await alice.get(page)).text
    await alice.aclose()
