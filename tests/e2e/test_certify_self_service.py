"""A partner certifies itself with partner tools only (docs/sandbox.md "Go live" walk-through), through
real processes (webhookd, authsvc knowing webhookd, an edge with the simulator, the reference receiver and
client): it registers its endpoint through the API, `svc certify start` opens a run with the default
schedule (a fault every 7th POST), the reference client runs until every fault came up, `svc certify
finish` makes the platform send the probe deliveries to the receiver, evaluate every check and sign the
report (no operator, no svcctl), and `svc certify verify` trusts it: every check passes. The run's own
routes are neither faulted nor recorded."""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest

from edge.testing import SANDBOX_HOSTS, edge_args
from svccli.__main__ import main as svc
from svckit.scopes import ALL_SCOPES
from tests.integration.test_certify_cli import run_cli
from tests.support import ROOT, ServiceProcess, free_port, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="ops@self-certify.example")


@dataclass
class Stack:
    authsvc: str
    sandbox: str  # the sandbox's base URL (its host is one of the edge's sandbox hosts)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("selfcert")
    procs: list[ServiceProcess] = []
    try:
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"), "--allow-private-targets", "--allow-http",
            "--poll-seconds", "0.1",
        )  # fmt: skip
        procs.append(wh)
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"), "--webhookd", wh.grpc_target)
        procs.append(auth)
        host = f"127.0.0.1:{free_port()}"
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge.db"), None,
                "--sandbox-listen", host, "--sandbox-hosts", f"{SANDBOX_HOSTS},{host}",
                "--sandbox-confirm-seconds", "0.1", "--rate-limit-sandbox", "0",
            ),
        ).start(tmp / "edge.log")  # fmt: skip
        procs.append(edge)
        yield Stack(auth.grpc_target, f"http://{host}")
    finally:
        for proc in reversed(procs):
            proc.terminate()


async def _sandbox_key(authsvc: str) -> tuple[str, str]:
    """What scripts/run hands a partner: an account and a sandbox key."""
    async with grpc.aio.insecure_channel(authsvc) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        account = (await auth.CreateAccount(pb.CreateAccountRequest(name="Self", actor=ACTOR))).account.id
        key = await auth.CreateKey(
            pb.CreateKeyRequest(
                account_id=account,
                environment=pb.ENVIRONMENT_SANDBOX,
                name="k",
                scopes=list(ALL_SCOPES),
                actor=ACTOR,
            )
        )
    return account, key.secret


def test_a_partner_certifies_itself_with_partner_tools(stack: Stack, tmp_path: pathlib.Path) -> None:
    asyncio.run(_walk_through(stack, tmp_path))


async def _walk_through(stack: Stack, tmp: pathlib.Path) -> None:
    _, secret = await _sandbox_key(stack.authsvc)
    api = ["--base-url", stack.sandbox, "--api-key", secret]
    headers = {"Authorization": f"Svc {secret}"}
    port = free_port()
    async with httpx.AsyncClient(base_url=stack.sandbox, timeout=30) as http:
        registered = await http.post(
            "/v1/webhooks/endpoints",
            headers={**headers, "Idempotency-Key": "self-endpoint"},
            json={
                "url": f"http://127.0.0.1:{port}/webhooks",
                "events": ["booking.confirmed", "booking.cancelled"],
                "signatureScheme": "both",
            },
        )
        assert registered.status_code == 201, registered.text
        receiver = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "examples.partner.receiver", "--port", str(port),
            "--secret", registered.json()["secret"], cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert receiver.stdout is not None
            assert (await asyncio.wait_for(receiver.stdout.readline(), 30)).startswith(b"listening on ")
            code, out, err = await run_cli(svc, *api, "certify", "start", "--length", "10m")
            assert code == 0 and "running" in out, out + err
            await asyncio.sleep(0.5)  # the edge hears of the run on its key-change watch
            # The run's own routes are never faulted: many status reads and a second start (409) do not
            # move the POST count.
            for _ in range(3):
                again = await http.post(
                    "/v1/certification/runs", headers={**headers, "Idempotency-Key": f"again-{_}"}, json={}
                )
                assert again.status_code == 409, again.text
            # The default schedule (every 7th POST: 503, 429, 504, 401): 16 rounds reach the 401.
            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "examples.partner.client", "--rounds", "16", *api],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert "stopped: 401" in done.stdout, done.stdout + done.stderr
            await asyncio.sleep(1.0)  # the edge's last records, the simulator's last deliveries
            status = (await http.get("/v1/certification/runs/latest", headers=headers)).json()
            assert status["status"] == "running" and status["reportFile"] is None
            posts = [line for line in done.stdout.splitlines() if line.startswith("POST ")]
            assert status["posts"] == len(posts)  # the client's POSTs, not the run's own routes
            report = tmp / "report.json"
            code, out, err = await run_cli(svc, *api, "certify", "finish", "--out", str(report))
            assert code == 0, out + err
            assert ": PASSED" in out, out
        finally:
            receiver.kill()
            await receiver.wait()
        again = await http.post(
            "/v1/certification/runs/latest/finish", headers={**headers, "Idempotency-Key": "twice"}, json={}
        )
        assert again.status_code == 409 and again.json()["error"]["type"] == "conflict"
    checks = {c["name"]: c for c in json.loads(report.read_text())["report"]["checks"]}
    # The probes were sent by the platform at the finish, in both schemes.
    assert len(checks["receiver_refuses_wrong_signature"]["evidence"]) == 2
    assert [n for n, c in checks.items() if not c["passed"]] == []
    code, _, err = await run_cli(svc, *api, "certify", "keys", "--out", str(tmp / "keys.json"))
    assert code == 0, err
    args = ["certify", "verify", str(report), "--keys", str(tmp / "keys.json")]
    code, out, _ = await run_cli(svc, *args)
    assert code == 0 and "report verified" in out and "PASSED" in out
