"""The portal's own pages over real HTTP: a read-only account's overview, the 404 and 500 pages,
and the favicon."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import html
import re

import httpx
import pytest
from sanic import Sanic

from portal.app import PortalConfig, create_app
from svckit.webserver import start
from tests.integration.portal_stack import (
    OPS,
    Stack,
    stack,  # noqa: F401 (the fixture)
)
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import identity_pb2 as ipb


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
