"""A sign-in flood against the portal over real HTTP: once an address is past its limit, its POST /signin
is answered 429 before anything else is done for it (no form parsed, no CSRF token checked, no attempt
counted, no template rendered but once), whatever its token, so a flood costs the portal the least it
can; an address within its limit is judged as before (a forged token is 403 and counts for nothing)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from portal import lifecycle, signin_limit
from portal.routes import session
from tests.integration.portal_stack import Stack, stack  # noqa: F401
from tests.support import csrf_of

FLOOD_FROM = "127.0.0.7"


def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often, from now on, a CSRF token is checked, a form parsed, an attempt counted and a page
    rendered."""
    calls = {"csrf": 0, "form": 0, "attempt": 0, "render": 0}

    def wrap(owner: Any, name: str, what: str) -> None:
        original = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls[what] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)

    wrap(lifecycle, "check_csrf", "csrf")
    wrap(session, "check_csrf", "csrf")
    wrap(session, "fields", "form")
    wrap(signin_limit.SourceLimiter, "attempt", "attempt")
    wrap(session, "render", "render")
    return calls


def client(stack: Stack, address: str) -> httpx.AsyncClient:  # noqa: F811
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=stack.url, transport=transport, timeout=30)


async def test_a_throttled_address_is_refused_before_its_form_or_token_is_read(
    stack: Stack,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signin_limit, "BURST", 2)
    monkeypatch.setattr(signin_limit, "PERIOD", 1000.0)  # nothing refills during the test
    async with client(stack, FLOOD_FROM) as flood:
        token = csrf_of((await flood.get("/signin")).text)

        def post(csrf: str) -> Any:
            return flood.post(
                "/signin", data={"csrf": csrf, "email": "x@flood.example", "password": "a" * 16}
            )

        assert [(await post(token)).status_code for _ in range(2)] == [401, 401]  # the address's burst
        calls = counted(monkeypatch)
        for csrf in [token, "forged", ""] * 4:
            got = await post(csrf)
            assert got.status_code == 429, got.text
            assert int(got.headers["retry-after"]) >= 1 and session.TOO_MANY_ATTEMPTS in got.text
            # The sign-in page again: its form carries this browser's token, its footer the request id.
            assert csrf_of(got.text) == token and f"request {got.headers['x-request-id']}<" in got.text
        assert calls == {"csrf": 0, "form": 0, "attempt": 0, "render": 0}
        # The page rendered once is the sign-in page render() makes, with the refusal above the form.
        form = await flood.get("/signin")
        alert = f'<p class="error" role="alert">{session.TOO_MANY_ATTEMPTS}</p>'
        rid = got.headers["x-request-id"]
        assert got.text.replace(alert, "").replace(rid, form.headers["x-request-id"]) == form.text


async def test_an_address_within_its_limit_is_judged_as_before(
    stack: Stack,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signin_limit, "BURST", 2)
    monkeypatch.setattr(signin_limit, "PERIOD", 1000.0)
    async with client(stack, FLOOD_FROM) as browser:
        token = csrf_of((await browser.get("/signin")).text)
        form = {"email": "x@flood.example", "password": "a" * 16}
        for _ in range(5):  # forged tokens are refused and count for nothing
            assert (await browser.post("/signin", data={**form, "csrf": "forged"})).status_code == 403
        got = [(await browser.post("/signin", data={**form, "csrf": token})).status_code for _ in range(3)]
        assert got == [401, 401, 429]
