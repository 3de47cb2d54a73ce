"""Refusal pacing (svckit.pacing) at the portal over real HTTP (issue 20: a sign-in flood's refusals were
answered as fast as the portal could, on the cores the partner API shares). Past its burst an address's
refused sign-ins (401, then 429 past the sign-in limit) are held; a signed-in user's pages are not."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import REGISTRY

from portal import app as portal_app
from svckit.pacing import Pacing, RefusalPacer
from tests.integration.portal_stack import Stack, stack  # noqa: F401
from tests.support import csrf_of

DELAY, BURST = 2.0, 3


def held() -> float:
    return REGISTRY.get_sample_value("refusals_paced_total", {"pace": "later"}) or 0.0


@pytest.fixture
def tight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The portal's pacer: a burst of 3, refilling at 0.001 a second, held 2 s (1 to 3 with its spread)."""
    monkeypatch.setattr(portal_app, "RefusalPacer", lambda *_: RefusalPacer(Pacing(DELAY, 0.001, BURST)))


async def test_refused_sign_ins_past_the_burst_are_held_and_pages_are_not(
    tight: None,
    stack: Stack,  # noqa: F811
) -> None:
    user = await stack.join("owner@acme.example")
    try:
        async with stack.client() as browser:
            token = csrf_of((await browser.get("/signin")).text)

            async def sign_in(i: int) -> int:
                form = {"csrf": token, "email": f"nobody{i}@attacker.example", "password": "hunter2 hunter2"}
                return (await browser.post("/signin", data=form)).status_code

            before = held()
            assert [await sign_in(i) for i in range(BURST)] == [401] * BURST
            assert held() == before
            started = time.monotonic()
            assert await sign_in(BURST) == 401
            assert time.monotonic() - started >= DELAY / 2  # the hold's least
            assert held() == before + 1

            # While another refusal is on its way (and held), the signed-in user's pages are answered,
            # none of them held.
            pending = asyncio.ensure_future(sign_in(BURST + 1))
            for _ in range(3):
                assert (await user.get("/live/keys")).status_code == 200
            assert await pending == 401
            assert held() == before + 2
    finally:
        await user.aclose()
