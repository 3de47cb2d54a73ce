"""The portal's sign-in limit over real HTTP against a real authsvc: past the burst of one address, or
past the global budget of many addresses, POST /signin answers 429 with Retry-After at once and authsvc
computes no hash for it."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client import REGISTRY

from portal import signin_limit
from portal.signin_limit import BURST, PERIOD
from tests.integration.portal_stack import Stack, stack  # noqa: F401
from tests.support import csrf_of


def _verifications() -> float:
    return REGISTRY.get_sample_value("authsvc_password_hashes_total", {"kind": "verify"}) or 0.0


async def test_a_sign_in_flood_from_one_address_is_refused_before_authsvc(stack: Stack) -> None:  # noqa: F811
    async with stack.client() as browser:
        token = csrf_of((await browser.get("/signin")).text)
        before = _verifications()
        statuses: list[int] = []
        retry_after: list[str] = []
        started = time.monotonic()
        for i in range(BURST + 15):
            got = await browser.post(
                "/signin",
                data={"csrf": token, "email": f"nobody{i}@attacker.example", "password": "hunter2 hunter2"},
            )
            statuses.append(got.status_code)
            if got.status_code == 429:
                retry_after.append(got.headers.get("retry-after", ""))
                assert "Too many sign-in attempts" in got.text
        # One more attempt is earned every PERIOD seconds: on a slow machine the flood may earn a few.
        earned = int((time.monotonic() - started) / PERIOD)
        assert statuses[:BURST] == [401] * BURST
        assert statuses.count(429) >= 15 - earned, statuses
        assert all(r.isdigit() and int(r) >= 1 for r in retry_after)
        assert _verifications() - before == statuses.count(401)  # the refused ones never reached authsvc


async def test_sign_ins_from_many_addresses_are_held_to_the_global_budget(
    stack: Stack,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sign-ins from 20 addresses in 20 networks (127.1.i.1, each within its own and its block's budget):
    past the portal's global budget the rest are 429 with Retry-After, unhashed; a signed-in user's pages
    are served all the while."""
    monkeypatch.setattr(signin_limit, "GLOBAL_BURST", 4)
    monkeypatch.setattr(signin_limit, "GLOBAL_PERIOD", 1000.0)  # nothing refills during the test
    user = await stack.join("owner@acme.example")
    try:
        assert (await user.get("/live/keys")).status_code == 200
        before = _verifications()
        statuses: list[int] = []
        for i in range(20):
            transport = httpx.AsyncHTTPTransport(local_address=f"127.1.{i}.1")
            async with httpx.AsyncClient(base_url=stack.url, transport=transport, timeout=30) as browser:
                token = csrf_of((await browser.get("/signin")).text)
                got = await browser.post(
                    "/signin",
                    data={
                        "csrf": token,
                        "email": f"nobody{i}@attacker.example",
                        "password": "hunter2 hunter2",
                    },
                )
                statuses.append(got.status_code)
                if got.status_code == 429:
                    assert int(got.headers["retry-after"]) >= 1
        assert statuses == [401] * 4 + [429] * 16
        assert _verifications() - before == 4
        # On a connection of its own: whether an idle keep-alive connection outlived the flood is not
        # what this asks (a browser opens another), but whether the user's session is still served.
        async with httpx.AsyncClient(base_url=stack.url, cookies=user.cookies, timeout=30) as again:
            assert (await again.get("/live/keys")).status_code == 200
    finally:
        await user.aclose()
