"""A run closes without an operator, against a real authsvc that knows a real webhookd and the reference
receiver (a process): a run past its end is finished by authsvc's housekeeping, which first sends the
probe deliveries to the sandbox endpoint (both schemes) and reads the subscribed kinds; the report is
signed and verifies. A finish while webhookd does not answer changes nothing and says so (503)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib

import grpc
import pytest
from google.protobuf import duration_pb2

from authsvc._server import run_server as run_authsvc
from svckit import certreport
from tests.e2e.test_certify_receiver import endpoint_at_receiver
from tests.support import free_port
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config
from webhookd._server import run_server as run_webhookd

OPS = apb.Actor(user="ops:certify-close-test")


async def _account_and_key(auth: auth_pb2_grpc.AuthServiceStub) -> tuple[str, str]:
    account = (await auth.CreateAccount(apb.CreateAccountRequest(name="Close", actor=OPS))).account.id
    key = await auth.CreateKey(
        apb.CreateKeyRequest(
            account_id=account,
            environment=apb.ENVIRONMENT_SANDBOX,
            name="k",
            scopes=["hotels:read"],
            actor=OPS,
        )
    )
    return account, key.key.id


async def test_a_run_past_its_end_is_probed_evaluated_and_signed(tmp_path: pathlib.Path) -> None:
    webhookd = await run_webhookd(
        Config(
            database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
        )
    )
    authsvc = await run_authsvc(
        "127.0.0.1:0",
        f"sqlite+aiosqlite:///{tmp_path / 'a.db'}",
        webhookd=f"127.0.0.1:{webhookd.port}",
        cert_close_interval=0.2,
    )
    try:
        async with (
            contextlib.AsyncExitStack() as stack,
            grpc.aio.insecure_channel(f"127.0.0.1:{authsvc.port}") as a,
            grpc.aio.insecure_channel(f"127.0.0.1:{webhookd.port}") as w,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(a)
            hooks = webhooks_pb2_grpc.WebhookServiceStub(w)
            account, key_id = await _account_and_key(auth)
            await endpoint_at_receiver(hooks, account, stack)
            run = (
                await auth.StartCertificationRun(
                    apb.StartCertificationRunRequest(
                        account_id=account,
                        key_id=key_id,
                        length=duration_pb2.Duration(seconds=1),
                        actor=OPS,
                    )
                )
            ).run
            got = apb.GetCertificationRunResponse()
            for _ in range(300):  # nobody finishes it: the housekeeping does, once its end has passed
                got = await auth.GetCertificationRun(
                    apb.GetCertificationRunRequest(account_id=account, run_id=run.id)
                )
                if got.run.status == apb.CERTIFICATION_RUN_STATUS_FINISHED:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the expired run was never closed")
            keys = await auth.ListCertificationKeys(apb.ListCertificationKeysRequest())
    finally:
        await authsvc.stop(0)
        await webhookd.stop(0)
    assert got.run.finished_at.ToDatetime() >= run.ends_at.ToDatetime()
    published = [certreport.parse_public_key(k.public_key) for k in keys.keys]
    report = certreport.verify(got.report.encode(), published)
    checks = {c["name"]: c for c in report["checks"]}
    # The probes went out at the close, in both schemes, and the reference receiver passed them.
    for name in ("accepts_valid", "refuses_wrong_signature", "refuses_stale", "tolerates_duplicate"):
        assert checks[f"receiver_{name}"]["passed"], checks[f"receiver_{name}"]
        assert len(checks[f"receiver_{name}"]["evidence"]) == 2
    # The kinds were read from webhookd: the subscribed kind was never delivered in this run.
    assert checks["webhook_kinds"]["detail"].startswith("never answered 2xx: booking.confirmed")
    assert json.loads(got.report)["report"]["runId"] == run.id


async def test_a_finish_without_webhookd_changes_nothing(tmp_path: pathlib.Path) -> None:
    gone = f"127.0.0.1:{free_port()}"  # nothing listens there
    authsvc = await run_authsvc(
        "127.0.0.1:0", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}", webhookd=gone, cert_close_interval=0
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{authsvc.port}") as a:
            auth = auth_pb2_grpc.AuthServiceStub(a)
            account, key_id = await _account_and_key(auth)
            await auth.StartCertificationRun(
                apb.StartCertificationRunRequest(account_id=account, key_id=key_id, actor=OPS)
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await auth.FinishCertificationRun(
                    apb.FinishCertificationRunRequest(account_id=account, run_id="latest", actor=OPS)
                )
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            got = await auth.GetCertificationRun(apb.GetCertificationRunRequest(account_id=account))
    finally:
        await authsvc.stop(0)
    assert got.run.status == apb.CERTIFICATION_RUN_STATUS_OPEN and not got.report
