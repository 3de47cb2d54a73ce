"""The session and CSRF cookies of a portal served over https (``--public-url https://...``, TLS ended by a
proxy in front) are ``__Host-`` cookies: Secure, Path=/, no Domain, so a sibling subdomain or a plain-http
answer cannot plant them; the bare names are not read there at all. Over real HTTP, cookies handled by
hand (httpx keeps Secure cookies for https)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import httpx
import pytest

from portal.app import PortalConfig
from portal.web import CSRF_COOKIE, SESSION_COOKIE
from tests.integration import portal_stack
from tests.integration.portal_stack import OPS, PASSWORD, Stack, stack  # noqa: F401
from tests.support import csrf_of
from travel.auth.v1 import identity_pb2 as ipb

HOST_SESSION, HOST_CSRF = f"__Host-{SESSION_COOKIE}", f"__Host-{CSRF_COOKIE}"


@pytest.fixture(autouse=True)
def https_portal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    config = functools.partial(PortalConfig, public_url="https://portal.example")
    monkeypatch.setattr(portal_stack, "PortalConfig", config)
    yield


def set_cookie(response: httpx.Response, name: str) -> tuple[str, set[str]]:
    """The value and the attributes (lower-cased, without values but Path's) of cookie ``name``."""
    for header in response.headers.get_list("set-cookie"):
        first, *attributes = (part.strip() for part in header.split(";"))
        key, _, value = first.partition("=")
        if key == name:
            return value, {a.lower() if not a.lower().startswith("path=") else a for a in attributes}
    raise AssertionError(f"no Set-Cookie {name}: {response.headers.get_list('set-cookie')}")


def host_cookie(attributes: set[str]) -> bool:
    return (
        "secure" in attributes
        and "Path=/" in attributes
        and not any(a.startswith("domain") for a in attributes)
    )


async def test_over_https_the_session_and_csrf_cookies_are_host_cookies(stack: Stack) -> None:  # noqa: F811
    made = await stack.ids.CreateInvite(
        ipb.CreateInviteRequest(
            account_id=stack.account_id, email="owner@acme.example", role=ipb.USER_ROLE_OWNER, actor=OPS
        )
    )
    await stack.ids.AcceptInvite(ipb.AcceptInviteRequest(token=made.token, password=PASSWORD))
    async with stack.client() as browser:
        page = await browser.get("/signin")
        nonce, attributes = set_cookie(page, HOST_CSRF)
        assert host_cookie(attributes) and "httponly" in attributes
        assert not any(name.startswith(CSRF_COOKIE) for name in page.cookies)  # never the bare name
        form = {"csrf": csrf_of(page.text), "email": "owner@acme.example", "password": PASSWORD}

        # The nonce planted under the bare name (as a sibling subdomain or plain http could): not read.
        browser.cookies.clear()
        planted = await browser.post("/signin", data=form, headers={"Cookie": f"{CSRF_COOKIE}={nonce}"})
        assert planted.status_code == 403

        signed = await browser.post("/signin", data=form, headers={"Cookie": f"{HOST_CSRF}={nonce}"})
        assert signed.status_code == 303, signed.text
        token, attributes = set_cookie(signed, HOST_SESSION)
        assert host_cookie(attributes) and "httponly" in attributes and "samesite=lax" in attributes

        browser.cookies.clear()
        keys = await browser.get("/live/keys", headers={"Cookie": f"{HOST_SESSION}={token}"})
        assert keys.status_code == 200
        bare = await browser.get("/live/keys", headers={"Cookie": f"{SESSION_COOKIE}={token}"})
        assert bare.status_code == 302 and bare.headers["location"] == "/signin"  # signed out

        out = await browser.post(
            "/signout",
            data={"csrf": csrf_of(keys.text)},
            headers={"Cookie": f"{HOST_SESSION}={token}", "Sec-Fetch-Site": "same-origin"},
        )
        assert out.status_code == 303
        value, attributes = set_cookie(out, HOST_SESSION)
        assert value in ("", '""') and "max-age=0" in attributes and host_cookie(attributes)
