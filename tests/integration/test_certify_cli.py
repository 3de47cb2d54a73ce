"""svcctl certify against a real authsvc and webhookd, and the partner's `svc certify verify` on what it
prints: start a run, finish it (webhookd says which kinds the sandbox endpoint subscribes to), fetch the
signed report and the published keys, verify offline; one changed byte does not verify."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import pathlib
from typing import Any

import grpc

from authsvc._server import run_server as run_authsvc
from svccli.__main__ import main as svc
from svcctl.__main__ import main as svcctl
from tests.e2e.test_certify_receiver import endpoint_at_receiver
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config
from webhookd._server import run_server as run_webhookd

OPS = apb.Actor(user="ops:certify-test")
# What the reference receiver answers each probe.
EXPECTED = (("valid", 204), ("wrong_signature", 400), ("stale_timestamp", 400), ("duplicate", 200))


async def run_cli(main: Any, *argv: str) -> tuple[int, str, str]:
    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        return code, out.getvalue(), err.getvalue()

    return await asyncio.to_thread(run)


async def test_start_finish_report_and_verify(tmp_path: pathlib.Path) -> None:
    authsvc = await run_authsvc("127.0.0.1:0", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    webhookd = await run_webhookd(
        Config(
            database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
            listen="127.0.0.1:0",
            policy=Policy(allow_private=True, allow_http=True),
        )
    )
    targets = ["--authsvc", f"127.0.0.1:{authsvc.port}", "--webhookd", f"127.0.0.1:{webhookd.port}"]
    base = [*targets, "--insecure-dev", "--actor", "ops:certify-test", "certify"]
    try:
        async with (
            contextlib.AsyncExitStack() as stack,
            grpc.aio.insecure_channel(f"127.0.0.1:{authsvc.port}") as a,
            grpc.aio.insecure_channel(f"127.0.0.1:{webhookd.port}") as w,
        ):
            auth = auth_pb2_grpc.AuthServiceStub(a)
            account = (await auth.CreateAccount(apb.CreateAccountRequest(name="Cert", actor=OPS))).account.id
            key = await auth.CreateKey(
                apb.CreateKeyRequest(
                    account_id=account,
                    environment=apb.ENVIRONMENT_SANDBOX,
                    name="k",
                    scopes=["hotels:read"],
                    actor=OPS,
                )
            )
            hooks = webhooks_pb2_grpc.WebhookServiceStub(w)
            await endpoint_at_receiver(hooks, account, stack)
            code, out, err = await run_cli(
                svcctl, *base, "start", "--account", account, "--key", key.key.id, "--length", "10m"
            )
            assert code == 0, err
            run = json.loads(out)["run"]
            assert run["status"] == "CERTIFICATION_RUN_STATUS_OPEN" and run["key_id"] == key.key.id
            code, out, _ = await run_cli(svcctl, *base, "report", "--account", account)
            assert code == 1 and "still open" in out
            code, out, err = await run_cli(svcctl, *base, "probe", "--account", account, "--run", run["id"])
            assert code == 0, err
            answers = {(r["kind"], r["scheme"]): r["status"] for r in json.loads(out)["results"]}
            assert answers == {
                (kind, scheme): status for scheme in ("stripe", "standard") for kind, status in EXPECTED
            }
            code, out, err = await run_cli(svcctl, *base, "finish", "--account", account, "--run", run["id"])
            assert code == 0, err
            assert json.loads(out)["status"] == "CERTIFICATION_RUN_STATUS_FINISHED"
            code, report, _ = await run_cli(svcctl, *base, "report", "--account", account)
            code_keys, keys, _ = await run_cli(svcctl, *base, "keys")
            assert code == code_keys == 0
    finally:
        await webhookd.stop(0)
        await authsvc.stop(0)

    checks = {c["name"]: c for c in json.loads(report)["report"]["checks"]}
    # Nothing was sent in this run: no booking flow, and the subscribed kind never delivered.
    assert checks["webhook_kinds"]["detail"].startswith("never answered 2xx: booking.confirmed")
    assert not checks["booking_flow"]["passed"]
    # The reference receiver passes every receiver check, in both schemes.
    for name in ("accepts_valid", "refuses_wrong_signature", "refuses_stale", "tolerates_duplicate"):
        assert checks[f"receiver_{name}"]["passed"], checks[f"receiver_{name}"]
        assert len(checks[f"receiver_{name}"]["evidence"]) == 2
    (tmp_path / "report.json").write_text(report)
    (tmp_path / "keys.json").write_text(keys)
    args = ["certify", "verify", str(tmp_path / "report.json"), "--keys", str(tmp_path / "keys.json")]
    code, out, _ = await run_cli(svc, *args)
    assert code == 0 and "report verified" in out and "FAILED" in out
    changed = report.replace('"passed": false', '"passed": true ', 1)
    assert changed != report
    (tmp_path / "report.json").write_text(changed)
    code, out, _ = await run_cli(svc, *args)
    assert code == 1 and "does NOT verify" in out
