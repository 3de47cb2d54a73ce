"""The portal's per-source sign-in limit over real HTTP against a real authsvc: past the burst, POST
/signin answers 429 with Retry-After at once and authsvc computes no hash for it."""

from __future__ import annotations

import time

from prometheus_client import REGISTRY

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
