"""The portal's Go-live checklist in real headless Chromium against real processes: with
requireCertification on, a run started with the page's Start button (running), finished with its Finish
button and failed (each failed check with its evidence, request ids linking to the request log), and a
passing one (certified); screenshots of the three."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import datetime as dt
from typing import Any

import grpc
import pytest

from tests.e2e.portal_stack import CHROMIUM, Stack, browser, join, shot, stack  # noqa: F401 (the fixtures)
from tests.integration.test_auth_certification_run import good_flow, good_probes
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")
OPS = apb.Actor(user="ops:e2e")
DELIVERED = [apb.CertificationDelivery(delivery_id="msg_d1", event_type="booking.confirmed", status=200)]


def _record(auth: Any, account_id: str, retry_changes_key: bool) -> dict[str, str]:
    """What the edge and the probes record during a run (the reference partner's, or one broken)."""
    run = auth.GetCertificationRun(apb.GetCertificationRunRequest(account_id=account_id)).run
    flow = good_flow(run.key_id, run.started_at.ToDatetime(dt.UTC))
    if retry_changes_key:
        flow[3].idempotency_key_digest = "another-key"
    where = {"account_id": account_id, "run_id": run.id}
    auth.RecordCertificationRequests(apb.RecordCertificationRequestsRequest(**where, requests=flow))
    auth.RecordCertificationProbes(apb.RecordCertificationProbesRequest(**where, probes=good_probes()))
    return where


def _finish(auth: Any, account_id: str, retry_changes_key: bool) -> None:
    where = _record(auth, account_id, retry_changes_key)
    auth.FinishCertificationRun(
        apb.FinishCertificationRunRequest(
            **where, subscribed_kinds=["booking.confirmed"], deliveries=DELIVERED, actor=OPS
        )
    )


def test_the_go_live_checklist(browser: Any, stack: Stack) -> None:
    with grpc.insecure_channel(stack.authsvc) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        auth.SetCertificationRequired(
            apb.SetCertificationRequiredRequest(account_id=stack.account_id, required=True, actor=OPS)
        )
        made = auth.CreateKey(
            apb.CreateKeyRequest(
                account_id=stack.account_id,
                environment=apb.ENVIRONMENT_SANDBOX,
                name="certification",
                scopes=["hotels:read", "hotels:write"],
                actor=OPS,
            )
        )
        context, page = join(browser, stack, "golive-owner@acme.example", ipb.USER_ROLE_OWNER)
        page.goto(stack.portal + "/sandbox/golive")
        assert page.text_content("[data-testid=requirement]") == "need a passing certification report"
        assert page.text_content("[data-testid=certified]") == "not yet"
        page.select_option("select[name=key_id]", value=made.key.id)
        page.click("[data-testid=start-form] >> text=Start")
        page.wait_for_selector("text=Certification run started")
        assert (page.text_content("[data-testid=run-status]") or "").startswith("running until")
        assert page.locator("[data-testid=start-form]").count() == 0  # one run at a time
        assert page.locator("[data-testid=finish-form]").count() == 1
        shot(page, "golive-running")

        # The Finish button: authsvc reads the account's sandbox endpoints from webhookd itself (none
        # here, so webhook_kinds fails too), evaluates and signs; the page redirects to the report.
        _record(auth, stack.account_id, retry_changes_key=True)
        page.click("[data-testid=finish-form] >> text=Finish")
        page.wait_for_selector("text=Certification run finished: failed")
        assert page.text_content("[data-testid=run-status]") == "failed"
        assert page.locator("[data-testid=finish-form]").count() == 0
        failed = page.locator("[data-testid=checks] tr[data-passed=no]")
        assert {failed.nth(i).get_attribute("data-check") for i in range(failed.count())} == {
            "retry_reuses_key",
            "webhook_kinds",
        }
        retry = page.locator("[data-testid=checks] tr[data-check=retry_reuses_key]")
        assert retry.locator("a[href*='/sandbox/requests?request_id=req_3']").count() == 1
        assert page.locator("[data-testid=checks] tr[data-passed=yes]").count() == 9
        assert page.text_content("[data-testid=certified]") == "not yet"
        shot(page, "golive-failed")

        page.click("[data-testid=start-form] >> text=Start")
        page.wait_for_selector("text=Certification run started")
        _finish(auth, stack.account_id, retry_changes_key=False)
        page.reload()
        assert page.text_content("[data-testid=run-status]") == "passed"
        assert page.locator("[data-testid=checks] tr[data-passed=no]").count() == 0
        assert (page.text_content("[data-testid=certified]") or "").startswith("yes, ")
        shot(page, "golive-passed")
        context.close()
