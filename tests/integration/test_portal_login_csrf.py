"""Login CSRF: an attacker's own nonce cookie and token, planted in a victim's browser, must not sign the
victim into the attacker's account from another site (portal.csrf.cross_origin), over real HTTP."""

from __future__ import annotations

import httpx

from portal.web import CSRF_COOKIE, SESSION_COOKIE
from tests.integration.portal_stack import PASSWORD, Stack, stack  # noqa: F401
from tests.support import csrf_of


async def test_a_planted_csrf_cookie_signs_nobody_in_from_another_site(stack: Stack) -> None:  # noqa: F811
    attacker = await stack.join("attacker@evil.example")
    await attacker.aclose()
    async with stack.client() as own:
        token = csrf_of((await own.get("/signin")).text)
        nonce = own.cookies[CSRF_COOKIE]
    form = {"csrf": token, "email": "attacker@evil.example", "password": PASSWORD}
    port = httpx.URL(stack.url).port
    for headers in (
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://attacker.example"},
        {"Sec-Fetch-Site": "same-site", "Origin": f"http://evil.localhost:{port}"},
        {"Origin": "https://attacker.example"},
    ):
        async with stack.client() as victim:
            victim.cookies.set(CSRF_COOKIE, nonce)  # planted, with the token made for it
            got = await victim.post("/signin", data=form, headers=headers)
            assert got.status_code == 403, (headers, got.status_code)
            assert SESSION_COOKIE not in got.cookies
    # The portal's own page, in the attacker's own browser, signs in as before.
    async with stack.client() as own:
        own.cookies.set(CSRF_COOKIE, nonce)
        got = await own.post(
            "/signin", data=form, headers={"Sec-Fetch-Site": "same-origin", "Origin": stack.url}
        )
        assert got.status_code == 303 and got.cookies.get(SESSION_COOKIE)
