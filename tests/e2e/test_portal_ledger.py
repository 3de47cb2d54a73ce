"""The portal's Ledger page in real headless Chromium against real processes (authsvc, webhookd, edge,
portal): a mode A account's balance and entries, newest first and paged, per environment; a mode B
account's page says it has none."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import re
from typing import Any

import grpc
import pytest

from tests.e2e.portal_stack import (  # noqa: F401 (the fixtures)
    CHROMIUM,
    PASSWORD,
    Stack,
    browser,
    join,
    shot,
    stack,
)
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc, identity_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")
OPS = apb.Actor(user="ops:e2e")
LIVE = apb.ENVIRONMENT_LIVE


def test_a_mode_a_account_reads_its_credit(browser: Any, stack: Stack) -> None:
    with grpc.insecure_channel(stack.authsvc) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        where: dict[str, Any] = {"account_id": stack.account_id, "environment": LIVE}
        auth.SetCreditLimit(
            apb.SetCreditLimitRequest(**where, credit_limit=1_000_000, currency="EUR", actor=OPS)
        )
        for n in range(30):
            auth.PlaceCreditHold(
                apb.PlaceCreditHoldRequest(**where, booking_ref=f"bk_{n:02d}", amount=25_000, currency="EUR")
            )
        auth.CaptureCreditHold(apb.CaptureCreditHoldRequest(**where, booking_ref="bk_00"))
        auth.ReleaseCreditHold(apb.ReleaseCreditHoldRequest(**where, booking_ref="bk_01"))
        auth.AddCredit(
            apb.AddCreditRequest(**where, amount=12_345, reference="pay_1", note="wire", actor=OPS)
        )
        ledger = auth.GetCreditLedger(apb.GetCreditLedgerRequest(**where)).ledger
    assert ledger.available == 1_000_000 - 28 * 25_000 - 25_000 + 12_345

    # Any member may read it (a viewer here).
    context, page = join(browser, stack, "ledger-viewer@acme.example", ipb.USER_ROLE_VIEWER)
    page.click("nav >> text=Ledger")
    page.wait_for_url(re.compile(r"/live/ledger$"))
    assert page.text_content("[data-testid=available]") == "2,873.45 EUR"
    assert page.text_content("[data-testid=limit]") == "10,000.00 EUR"
    assert page.text_content("[data-testid=held]") == "7,000.00 EUR"
    assert page.text_content("[data-testid=captured]") == "250.00 EUR"
    assert page.text_content("[data-testid=credits]") == "123.45 EUR"
    assert "10 % of the limit" in page.text_content("[data-testid=warning]")
    shot(page, "ledger")
    rows = page.locator("[data-testid=entries] tbody tr")
    assert rows.count() == 25
    # Newest first: the credit, then the release and the capture.
    first = rows.nth(0).text_content() or ""
    assert "Credit added" in first and "pay_1" in first and "wire" in first and "2,873.45 EUR" in first
    assert "Released" in (rows.nth(1).text_content() or "") and "bk_01" in (rows.nth(1).text_content() or "")
    page.click("[data-testid=next-page]")
    page.wait_for_url(re.compile(r"/live/ledger\?page="))
    older = page.locator("[data-testid=entries] tbody tr")
    assert older.count() == 34 - 25
    assert "Credit limit set" in (older.nth(older.count() - 1).text_content() or "")

    # The sandbox has its own ledger, untouched by live bookings.
    page.click("[data-testid=env-switch]")
    page.wait_for_url(re.compile(r"/sandbox/ledger$"))
    assert page.text_content("[data-testid=available]") == "0.00"
    assert "No entries yet" in (page.text_content("[data-testid=entries]") or "")
    assert "Sandbox bookings never spend credit" in page.content()
    context.close()


def test_a_mode_b_account_has_no_ledger(browser: Any, stack: Stack) -> None:
    with grpc.insecure_channel(stack.authsvc) as channel:
        account = (
            auth_pb2_grpc.AuthServiceStub(channel)
            .CreateAccount(apb.CreateAccountRequest(name="Pay Later", mode=apb.ACCOUNT_MODE_B, actor=OPS))
            .account
        )
        token = (
            identity_pb2_grpc.IdentityServiceStub(channel)
            .CreateInvite(
                ipb.CreateInviteRequest(
                    account_id=account.id, email="b@paylater.example", role=ipb.USER_ROLE_OWNER, actor=OPS
                )
            )
            .token
        )
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{stack.portal}/invite/{token}")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/live/$"))
    page.goto(f"{stack.portal}/live/ledger")
    assert "mode B" in (page.text_content("[data-testid=mode-b]") or "")
    assert page.locator("[data-testid=balance]").count() == 0
    context.close()
