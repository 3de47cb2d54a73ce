"""The reference partner's client against the sandbox through real processes (authsvc, webhookd, an
edge on the default route table: the built-in simulator), during a certification run with a fault every
3rd POST: the reference client passes every client check, and each broken variant (one flag) fails
exactly its one client check. (The receiver checks: tests/e2e/test_certify_receiver.py and
tests/integration/test_certify_cli.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from edge.testing import SANDBOX_HOST, edge_args
from svccli.__main__ import main as svc
from svcctl.__main__ import main as svcctl
from svckit.scopes import ALL_SCOPES
from tests.e2e.test_certify_receiver import endpoint_at_receiver
from tests.integration.test_certify_cli import run_cli
from tests.support import ROOT, ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc

ACTOR = pb.Actor(user="ops@certify.example")
CLIENT_CHECKS = {
    "idempotency_key_present",
    "retry_reuses_key",
    "honours_retry_after",
    "no_unauthorized_loop",
    "no_quota_loop",
    "booking_flow",
}


@dataclass
class Stack:
    edge: ServiceProcess
    authsvc: str
    webhookd: str

    def url(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['sandbox_port']}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("certify")
    procs: list[ServiceProcess] = []
    try:
        wh = start_service(
            "webhookd",
            tmp,
            sqlite_url(tmp, "w.db"),
            "--allow-private-targets",
            "--allow-http",
            "--poll-seconds",
            "0.1",
        )
        procs.append(wh)
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"), "--webhookd", wh.grpc_target)
        procs.append(auth)
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge.db"), None,
                "--sandbox-confirm-seconds", "0.2", "--rate-limit-sandbox", "0",
            ),
        ).start(tmp / "edge.log")  # fmt: skip
        procs.append(edge)
        yield Stack(edge, auth.grpc_target, wh.grpc_target)
    finally:
        for proc in reversed(procs):
            proc.terminate()


async def certify(stack: Stack, *flags: str) -> dict[str, dict[str, object]]:
    async with grpc.aio.insecure_channel(stack.authsvc) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        account = (await auth.CreateAccount(pb.CreateAccountRequest(name="Ref", actor=ACTOR))).account.id
        key = await auth.CreateKey(
            pb.CreateKeyRequest(
                account_id=account,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="k",
                scopes=list(ALL_SCOPES),
                actor=ACTOR,
            )
        )
        run = (
            await auth.StartCertificationRun(
                pb.StartCertificationRunRequest(
                    account_id=account, key_id=key.key.id, fault_every=3, actor=ACTOR
                )
            )
        ).run
        await asyncio.sleep(0.5)  # the edge hears of the run on its key-change watch
        # Five rounds: past the 12th POST, the schedule's 401 (every 3rd POST: 503, 429, 504, 401).
        args = [
            "--base-url",
            stack.url(),
            "--host",
            SANDBOX_HOST,
            "--api-key",
            key.secret,
            "--rounds",
            "5",
            *flags,
        ]
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "examples.partner.client", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "rounds completed" in done.stdout, done.stdout + done.stderr
        for _ in range(50):  # the edge sends its records every 0.2 s
            got = (await auth.GetCertificationRun(pb.GetCertificationRunRequest(account_id=account))).run
            if got.requests and got.posts <= got.requests:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        finished = await auth.FinishCertificationRun(
            pb.FinishCertificationRunRequest(account_id=account, run_id=run.id, actor=ACTOR)
        )
    report = json.loads(finished.report)["report"]
    return {c["name"]: c for c in report["checks"] if c["name"] in CLIENT_CHECKS}


@pytest.mark.parametrize(
    ("flags", "failing"),
    [
        ((), set()),
        (("--no-key-on-retry",), {"idempotency_key_present"}),
        (("--new-key-on-retry",), {"retry_reuses_key"}),
        (("--ignore-retry-after",), {"honours_retry_after"}),
        (("--retry-401",), {"no_unauthorized_loop"}),
    ],
    ids=["reference", "no-key-on-retry", "new-key-on-retry", "ignores-retry-after", "retries-401"],
)
def test_the_reference_client_and_its_broken_variants(
    stack: Stack, flags: tuple[str, ...], failing: set[str]
) -> None:
    checks = asyncio.run(certify(stack, *flags))
    assert {n for n, c in checks.items() if not c["passed"]} == failing, {
        n: c["detail"] for n, c in checks.items()
    }
    for name in failing:
        assert checks[name]["evidence"]


def test_the_reference_partner_passes_every_check_in_one_run(stack: Stack, tmp_path: pathlib.Path) -> None:
    """One run, everything real: the reference receiver (a process) behind a sandbox endpoint of scheme
    both, the reference client through the edge, the simulator's events delivered by webhookd, the probes
    sent by webhookd (svcctl certify probe), the report made by svcctl certify finish and verified by the
    partner's `svc certify verify`: every check passes."""
    asyncio.run(_one_run(stack, tmp_path))


async def _one_run(stack: Stack, tmp_path: pathlib.Path) -> None:
    async with (
        contextlib.AsyncExitStack() as exits,
        grpc.aio.insecure_channel(stack.authsvc) as a,
        grpc.aio.insecure_channel(stack.webhookd) as w,
    ):
        auth, hooks = auth_pb2_grpc.AuthServiceStub(a), webhooks_pb2_grpc.WebhookServiceStub(w)
        account = (await auth.CreateAccount(pb.CreateAccountRequest(name="Ref", actor=ACTOR))).account.id
        await auth.SetCertificationRequired(
            pb.SetCertificationRequiredRequest(account_id=account, required=True, actor=ACTOR)
        )
        key = await auth.CreateKey(
            pb.CreateKeyRequest(
                account_id=account,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="k",
                scopes=list(ALL_SCOPES),
                actor=ACTOR,
            )
        )
        live = pb.CreateKeyRequest(
            account_id=account,
            environment=pb.ENVIRONMENT_LIVE,
            name="prod",
            scopes=["hotels:read"],
            actor=ACTOR,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await auth.CreateKey(live)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        await endpoint_at_receiver(hooks, account, exits, events=("booking.confirmed", "booking.cancelled"))
        base = ["--authsvc", stack.authsvc, "--webhookd", stack.webhookd, "--insecure-dev", "certify"]
        code, out, err = await run_cli(
            svcctl, *base, "start", "--account", account, "--key", key.key.id, "--fault-every", "3"
        )
        assert code == 0, err
        run_id = json.loads(out)["run"]["id"]
        await asyncio.sleep(0.5)  # the edge hears of the run on its key-change watch
        args = ["--base-url", stack.url(), "--host", SANDBOX_HOST, "--api-key", key.secret]
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "examples.partner.client", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "rounds completed: 4" in done.stdout, done.stdout + done.stderr
        for _ in range(100):  # the simulator's events, delivered to the receiver
            listed = await hooks.ListDeliveries(
                wpb.ListDeliveriesRequest(account_id=account, environment=wpb.ENVIRONMENT_SANDBOX)
            )
            kinds = {d.event_type for d in listed.deliveries if d.status == wpb.DELIVERY_STATUS_SUCCEEDED}
            if {"booking.confirmed", "booking.cancelled"} <= kinds:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the edge's last records
        code, _, err = await run_cli(svcctl, *base, "probe", "--account", account, "--run", run_id)
        assert code == 0, err
        code, _, err = await run_cli(svcctl, *base, "finish", "--account", account, "--run", run_id)
        assert code == 0, err
        _, report, _ = await run_cli(svcctl, *base, "report", "--account", account)
        _, keys, _ = await run_cli(svcctl, *base, "keys")
        certified = (await auth.GetAccount(pb.GetAccountRequest(account_id=account))).account.certification
        assert (await auth.CreateKey(live)).key.environment == pb.ENVIRONMENT_LIVE  # the gate opened
    checks = json.loads(report)["report"]["checks"]
    assert [c["name"] for c in checks if not c["passed"]] == [], checks
    assert certified.HasField("certified_at")
    (tmp_path / "report.json").write_text(report)
    (tmp_path / "keys.json").write_text(keys)
    code, out, _ = await run_cli(
        svc, "certify", "verify", str(tmp_path / "report.json"), "--keys", str(tmp_path / "keys.json")
    )
    assert code == 0 and "PASSED" in out
