"""GET /sandbox/golive: the Go-live checklist. Whether the account must be certified before it may create
live keys and whether it is, the latest certification run (open: its key, its end and what it has seen so
far; finished: every check, passed or failed, with its evidence), and a Start button that opens a run for
one of the account's sandbox keys, and while a run is open a Finish button (the probes, the checks, the
signed report: authsvc._certify_close) (docs/sandbox.md "Go live"). The live environment's URL shows the same
page: a run is always in the sandbox."""

from __future__ import annotations

import json
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal.context import PortalRequest, auth
from portal.forms import fields
from portal.routes.keys import actor
from portal.web import need, redirect, render
from svckit.clients import ClientError
from travel.auth.v1 import auth_pb2 as apb

bp = Blueprint("portal_golive")


def checks_of(report: str) -> list[dict[str, Any]]:
    """The checks of a signed report file (the portal shows them; `svc certify verify` is what trusts)."""
    if not report:
        return []
    found = json.loads(report).get("report", {}).get("checks", [])
    return [c for c in found if isinstance(c, dict)]


async def _page(request: PortalRequest, status: int = 200, error: str = "") -> HTTPResponse:
    viewer = need(request, "keys.read")
    account_id = viewer.user.account_id
    account = (await auth(request).get_account(apb.GetAccountRequest(account_id=account_id))).account
    run: apb.CertificationRun | None = None
    report = ""
    try:
        got = await auth(request).get_certification_run(apb.GetCertificationRunRequest(account_id=account_id))
        run, report = got.run, got.report
    except ClientError as exc:
        if exc.type != "not_found":
            raise
    keys = await auth(request).list_keys(
        apb.ListKeysRequest(account_id=account_id, environment=apb.ENVIRONMENT_SANDBOX)
    )
    return render(
        request,
        "golive.html",
        status,
        account=account,
        run=run,
        open=run is not None and run.status == apb.CERTIFICATION_RUN_STATUS_OPEN,
        checks=checks_of(report),
        keys=[k for k in keys.keys if k.status != apb.KEY_STATUS_REVOKED],
        errors={"form": error} if error else {},
    )


@bp.get("/<env:str>/golive")
async def golive(request: PortalRequest, env: str) -> HTTPResponse:
    return await _page(request)


@bp.post("/<env:str>/golive/start")
async def start(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "keys.write")
    key_id = fields(request).get("key_id", "")
    try:
        await auth(request).start_certification_run(
            apb.StartCertificationRunRequest(
                account_id=viewer.user.account_id, key_id=key_id, actor=actor(request)
            )
        )
    except ClientError as exc:
        if exc.status >= 500:
            raise
        return await _page(request, exc.status, exc.detail)
    return redirect(request, f"/{env}/golive", "Certification run started")


# The finish waits for the probe deliveries to the account's endpoints (each cut off after 10 s).
FINISH_DEADLINE = 330.0


@bp.post("/<env:str>/golive/finish")
async def finish(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "keys.write")
    run_id = fields(request).get("run_id", "")
    try:
        done = await auth(request).finish_certification_run(
            apb.FinishCertificationRunRequest(
                account_id=viewer.user.account_id, run_id=run_id or "latest", actor=actor(request)
            ),
            timeout=FINISH_DEADLINE,
        )
    except ClientError as exc:
        if exc.status >= 500:
            raise
        return await _page(request, exc.status, exc.detail)
    verdict = "passed" if done.run.passed else "failed: see the checks"
    return redirect(request, f"/{env}/golive", f"Certification run finished: {verdict}")
