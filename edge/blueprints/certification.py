"""Certification runs for partners (docs/sandbox.md "Go live"), sandbox only, any key (no scope: a run
concerns the calling key alone):

- ``POST /v1/certification/runs`` ``{"length": "30m"}`` (optional; 1 s to 2 h) opens a run for the
  calling sandbox key (authsvc refuses a second open run of the account: 409 ``conflict``);
- ``GET /v1/certification/runs/latest``: the account's latest run, with ``reportFile`` (the signed report,
  exactly as it is to be saved and verified) once finished;
- ``POST /v1/certification/runs/{id}/finish`` (``latest`` for the latest): the partner says its
  integration is done. authsvc sends the probe deliveries to the sandbox endpoints (the receiver must be
  up), evaluates every check and signs the report; the answer is the finished run with ``reportFile``.
  The call waits for the probes (each cut off after 10 s). A run past its end is finished by authsvc's
  housekeeping instead (409 ``conflict`` here once it is);
- ``GET /v1/certification/keys``: the platform's report-signing public keys, in the format
  ``svc certify verify --keys`` reads.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import duration_pb2
from sanic import Blueprint
from sanic.response import HTTPResponse

from edge import convert
from edge.context import EdgeRequest
from edge.environments import Environment
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import json_response
from svckit import certreport
from svckit.durations import clock_advance
from travel.auth.v1 import auth_pb2

bp = Blueprint("certification")
RUNS = "/v1/certification/runs"
LATEST = "/v1/certification/runs/latest"
FINISH = "/v1/certification/runs/<run_id:str>/finish"
# The finish waits for the probe deliveries (authsvc._certify_close), more than a unary call's default.
FINISH_DEADLINE = 330.0
KEYS = certreport.KEYS_PATH
STATUS = {
    auth_pb2.CERTIFICATION_RUN_STATUS_OPEN: "running",
    auth_pb2.CERTIFICATION_RUN_STATUS_FINISHED: "finished",
}


def _sandbox_only(ctx: Ctx, what: str) -> None:
    if ctx.environment is not Environment.SANDBOX:
        raise EdgeError(f"{what} exists only on the sandbox host", type="not_found")


def run_body(run: auth_pb2.CertificationRun, report: str = "") -> dict[str, Any]:
    finished = run.status == auth_pb2.CERTIFICATION_RUN_STATUS_FINISHED
    return {
        "object": "certification_run",
        "id": run.id,
        "apiKey": run.key_id,
        "status": STATUS.get(run.status, "running"),
        "startedAt": convert.iso(run.started_at.ToDatetime()),
        "endsAt": convert.iso(run.ends_at.ToDatetime()),
        "finishedAt": convert.iso(run.finished_at.ToDatetime()) if run.HasField("finished_at") else None,
        "passed": run.passed if finished else None,
        "faultEvery": run.fault_every,
        "posts": run.posts,
        "requests": run.requests,
        "reportFile": report or None,
    }


@bp.post(RUNS)
@guarded("", write=False)
async def start_run(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    _sandbox_only(ctx, f"POST {RUNS}")
    body = convert.only_fields(ctx.body, {"length"})
    text = convert.string_field(body, "length", max_len=32) or ""
    length = None
    if text:
        try:
            length = duration_pb2.Duration(seconds=int(clock_advance(text).total_seconds()))
        except ValueError as exc:
            raise EdgeError(f"the field length: {exc}", type="invalid_request") from None
    resp = await request.app.ctx.auth.start_certification_run(
        auth_pb2.StartCertificationRunRequest(
            account_id=ctx.caller.account_id,
            key_id=ctx.caller.key_id,
            length=length,
            actor=auth_pb2.Actor(user=f"api key {ctx.caller.key_id}", source_address=ctx.source),
        )
    )
    return json_response(run_body(resp.run), status=201)


@bp.post(FINISH)
@guarded("", write=False)
async def finish_run(request: EdgeRequest, ctx: Ctx, run_id: str) -> HTTPResponse:
    _sandbox_only(ctx, "POST /v1/certification/runs/{id}/finish")
    convert.only_fields(ctx.body, set())
    if run_id != "latest" and not run_id.startswith("crun_"):
        raise EdgeError("no certification run " + repr(run_id[:40]), type="not_found")
    resp = await request.app.ctx.auth.finish_certification_run(
        auth_pb2.FinishCertificationRunRequest(
            account_id=ctx.caller.account_id,
            run_id=run_id,
            actor=auth_pb2.Actor(user=f"api key {ctx.caller.key_id}", source_address=ctx.source),
        ),
        timeout=FINISH_DEADLINE,
    )
    return json_response(run_body(resp.run, resp.report))


@bp.get(LATEST)
@guarded("")
async def latest_run(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    _sandbox_only(ctx, f"GET {LATEST}")
    resp = await request.app.ctx.auth.get_certification_run(
        auth_pb2.GetCertificationRunRequest(account_id=ctx.caller.account_id)
    )
    return json_response(run_body(resp.run, resp.report))


@bp.get(KEYS)
@guarded("")
async def signing_keys(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    resp = await request.app.ctx.auth.list_certification_keys(auth_pb2.ListCertificationKeysRequest())
    keys = [certreport.parse_public_key(k.public_key).as_json() for k in resp.keys]
    return json_response({"keys": keys})
