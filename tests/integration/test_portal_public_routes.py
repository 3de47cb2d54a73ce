"""The portal's public routes over real HTTP: matched whole (a path only starting like one needs a
session), still served signed out, and refused requests logged as counts."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from tests.integration.portal_stack import (
    Stack,
    stack,  # noqa: F401 (the fixture)
)


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

    # The burst's counts are logged at once and by the log's timer an interval after the last summary
    # (an earlier test's may have been less than that ago): wait until all 300 are counted, not for a time.
    def summaries() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "portal" and r.getMessage() == "refused requests"]

    for _ in range(200):
        if sum(r.__dict__["total"] for r in summaries()) >= 300:
            break
        await asyncio.sleep(0.05)
    assert sum(r.__dict__["total"] for r in summaries()) >= 300
    assert [r for r in caplog.records if r.name == "portal" and r.getMessage() == "request"] == []
    assert 1 <= len(summaries()) <= 10, len(summaries())
