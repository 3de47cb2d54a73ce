"""The portal's CSRF tokens over real HTTP: bound to the server's key and the session, and a
signed-out form's token signed by the portal."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import hashlib
import hmac

import httpx

from portal.web import CSRF_COOKIE, SESSION_COOKIE
from tests.integration.portal_stack import (
    PASSWORD,
    Stack,
    stack,  # noqa: F401 (the fixture)
)
from tests.support import csrf_of


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
