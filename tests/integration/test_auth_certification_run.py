"""A certification run in authsvc over real gRPC, on SQLite and PostgreSQL: it belongs to one sandbox key
of one account (never a live key, never another account's key); the fault schedule is counted over the
run; only the run key's records are kept; finishing evaluates every check and stores a report signed with
a published key that verifies offline; a passing report certifies the account, a failing one does not."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from authsvc.testing import ACTOR, error_of, new_account, running_authsvc
from svckit import certreport
from travel.auth.v1 import auth_pb2 as pb


async def new_key(stub: Any, account_id: str, env: pb.Environment.ValueType = pb.ENVIRONMENT_SANDBOX) -> str:
    made = await stub.CreateKey(
        pb.CreateKeyRequest(
            account_id=account_id, environment=env, name="k", scopes=["hotels:read"], actor=ACTOR
        )
    )
    return str(made.key.id)


def record(
    n: int, key_id: str, at: dt.datetime, method: str, path: str, status: int = 200, **kw: object
) -> pb.CertificationRequest:
    when = timestamp_pb2.Timestamp()
    when.FromDatetime(at)
    return pb.CertificationRequest(
        request_id=f"req_{n}",
        key_id=key_id,
        method=method,
        path=path,
        status=status,
        received_at=when,
        **kw,  # type: ignore[arg-type]
    )


def good_flow(key_id: str, t0: dt.datetime) -> list[pb.CertificationRequest]:
    s = dt.timedelta(seconds=1)
    return [
        record(1, key_id, t0 + s, "GET", "/v1/hotels/search"),
        record(2, key_id, t0 + 2 * s, "GET", "/v1/hotels/offers/off_1"),
        record(
            3,
            key_id,
            t0 + 3 * s,
            "POST",
            "/v1/hotels/bookings",
            503,
            idempotency_key_digest="a",
            body_digest="b",
            fault="service_unavailable",
        ),
        record(
            4,
            key_id,
            t0 + 4 * s,
            "POST",
            "/v1/hotels/bookings",
            201,
            idempotency_key_digest="a",
            body_digest="b",
        ),
        record(
            5,
            key_id,
            t0 + 5 * s,
            "POST",
            "/v1/hotels/bookings/bk_1/cancel",
            429,
            idempotency_key_digest="c",
            body_digest="d",
            fault="rate_limited",
            retry_after=2,
        ),
        record(
            6,
            key_id,
            t0 + 8 * s,
            "POST",
            "/v1/hotels/bookings/bk_1/cancel",
            200,
            idempotency_key_digest="c",
            body_digest="d",
        ),
    ]


def good_probes() -> list[pb.CertificationProbe]:
    answers = {"valid": 204, "wrong_signature": 400, "stale_timestamp": 400, "duplicate": 200}
    return [
        pb.CertificationProbe(
            delivery_id=f"msg_{kind}_{scheme}",
            kind=kind,
            scheme=scheme,
            status=status,
            latency=duration_pb2.Duration(nanos=5_000_000),
        )
        for scheme in ("stripe", "standard")
        for kind, status in answers.items()
    ]


async def test_a_run_from_start_to_a_signed_report(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account, other = await new_account(stub), await new_account(stub)
        key, second = await new_key(stub, account.id), await new_key(stub, account.id)
        live = await new_key(stub, account.id, pb.ENVIRONMENT_LIVE)
        foreign = await new_key(stub, other.id)
        await stub.SetCertificationRequired(
            pb.SetCertificationRequiredRequest(account_id=account.id, required=True, actor=ACTOR)
        )

        def start(key_id: str, account_id: str = account.id) -> Any:
            return stub.StartCertificationRun(
                pb.StartCertificationRunRequest(
                    account_id=account_id,
                    key_id=key_id,
                    fault_every=2,
                    length=duration_pb2.Duration(seconds=3600),
                    actor=ACTOR,
                )
            )

        assert (await error_of(start(live)))[1] == "invalid_request"  # never live traffic
        assert (await error_of(start(foreign)))[1] == "not_found"  # never another account's key
        run = (await start(key)).run
        assert run.status == pb.CERTIFICATION_RUN_STATUS_OPEN and run.key_id == key
        code, etype, _ = await error_of(start(second))
        assert (code, etype) == (grpc.StatusCode.FAILED_PRECONDITION, "conflict")
        shown = (await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))).account.certification
        assert (shown.open_run_id, shown.open_run_key_id, shown.fault_every) == (run.id, key, 2)
        assert not (
            await stub.GetAccount(pb.GetAccountRequest(account_id=other.id))
        ).account.certification.open_run_id

        claims = [
            await stub.ClaimCertificationFault(
                pb.ClaimCertificationFaultRequest(account_id=account.id, run_id=run.id)
            )
            for _ in range(4)
        ]
        assert [(c.nth_post, c.fault, c.retry_after) for c in claims] == [
            (1, "", 0),
            (2, "service_unavailable", 0),
            (3, "", 0),
            (4, "rate_limited", 2),
        ]
        # Another account cannot count (or learn of) this run's POSTs.
        wrong = await stub.ClaimCertificationFault(
            pb.ClaimCertificationFaultRequest(account_id=other.id, run_id=run.id)
        )
        assert wrong.nth_post == 0

        t0 = run.started_at.ToDatetime(dt.UTC)
        records = [*good_flow(key, t0), record(90, second, t0, "POST", "/v1/hotels/bookings", 201)]
        filed = await stub.RecordCertificationRequests(
            pb.RecordCertificationRequestsRequest(account_id=account.id, run_id=run.id, requests=records)
        )
        assert filed.recorded == 6  # the other key's request is not the run's
        again = await stub.RecordCertificationRequests(
            pb.RecordCertificationRequestsRequest(account_id=account.id, run_id=run.id, requests=records)
        )
        assert again.recorded == 0
        elsewhere = await stub.RecordCertificationRequests(
            pb.RecordCertificationRequestsRequest(account_id=other.id, run_id=run.id, requests=records)
        )
        assert elsewhere.recorded == 0
        await stub.RecordCertificationProbes(
            pb.RecordCertificationProbesRequest(account_id=account.id, run_id=run.id, probes=good_probes())
        )

        done = await stub.FinishCertificationRun(
            pb.FinishCertificationRunRequest(
                account_id=account.id,
                run_id=run.id,
                subscribed_kinds=["booking.confirmed"],
                deliveries=[
                    pb.CertificationDelivery(delivery_id="msg_d1", event_type="booking.confirmed", status=200)
                ],
                actor=ACTOR,
            )
        )
        keys = certreport.parse_keys(
            {
                "keys": [
                    {"keyId": k.key_id, "algorithm": "ed25519", "publicKey": k.public_key}
                    for k in (await stub.ListCertificationKeys(pb.ListCertificationKeysRequest())).keys
                ]
            }
        )
        report = certreport.verify(done.report.encode(), keys)
        assert report["passed"] is True, [c for c in report["checks"] if not c["passed"]]
        assert (report["runId"], report["accountId"], report["apiKeyId"]) == (run.id, account.id, key)
        assert {c["name"]: c["evidence"] for c in report["checks"]}["booking_flow"] == [
            "req_1",
            "req_2",
            "req_4",
            "req_6",
        ]
        assert done.run.status == pb.CERTIFICATION_RUN_STATUS_FINISHED and done.run.passed

        fetched = await stub.GetCertificationRun(pb.GetCertificationRunRequest(account_id=account.id))
        assert fetched.report == done.report
        assert (
            await error_of(
                stub.GetCertificationRun(pb.GetCertificationRunRequest(account_id=other.id, run_id=run.id))
            )
        )[1] == "not_found"
        certified = (await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))).account.certification
        assert certified.HasField("certified_at") and not certified.open_run_id
        # The gate opens: a live key may now be created.
        await new_key(stub, account.id, pb.ENVIRONMENT_LIVE)
        assert (
            await error_of(
                stub.FinishCertificationRun(
                    pb.FinishCertificationRunRequest(account_id=account.id, run_id=run.id, actor=ACTOR)
                )
            )
        )[1] == "conflict"
        # After the run, the key's requests are no longer recorded.
        late = await stub.RecordCertificationRequests(
            pb.RecordCertificationRequestsRequest(account_id=account.id, run_id=run.id, requests=records)
        )
        assert late.recorded == 0


async def test_a_failing_run_does_not_certify(db_url: str) -> None:
    async with running_authsvc(db_url) as (_server, stub):
        account = await new_account(stub)
        key = await new_key(stub, account.id)
        run = (
            await stub.StartCertificationRun(
                pb.StartCertificationRunRequest(account_id=account.id, key_id=key, actor=ACTOR)
            )
        ).run
        assert run.fault_every == 7
        assert (run.ends_at.ToDatetime() - run.started_at.ToDatetime()) == dt.timedelta(minutes=30)
        t0 = run.started_at.ToDatetime(dt.UTC)
        flow = good_flow(key, t0)
        flow[3].idempotency_key_digest = "a-new-key"  # the retry after the 503 changed its key
        await stub.RecordCertificationRequests(
            pb.RecordCertificationRequestsRequest(account_id=account.id, run_id=run.id, requests=flow)
        )
        await stub.RecordCertificationProbes(
            pb.RecordCertificationProbesRequest(account_id=account.id, run_id=run.id, probes=good_probes())
        )
        done = await stub.FinishCertificationRun(
            pb.FinishCertificationRunRequest(
                account_id=account.id,
                run_id=run.id,
                subscribed_kinds=["booking.confirmed"],
                deliveries=[
                    pb.CertificationDelivery(delivery_id="msg_d1", event_type="booking.confirmed", status=200)
                ],
                actor=ACTOR,
            )
        )
        report = json.loads(done.report)["report"]
        assert report["passed"] is False
        assert [c["name"] for c in report["checks"] if not c["passed"]] == ["retry_reuses_key"]
        assert set(next(c for c in report["checks"] if c["name"] == "retry_reuses_key")["evidence"]) == {
            "req_3",
            "req_4",
        }
        assert not (
            await stub.GetAccount(pb.GetAccountRequest(account_id=account.id))
        ).account.certification.HasField("certified_at")
        audit = await stub.ListAuditEvents(
            pb.ListAuditEventsRequest(account_id=account.id, action="certification.finished")
        )
        assert [e.after["passed"] for e in audit.events] == [False]
