"""The whole stack as a partner meets it: authsvc, webhookd and edge as real processes, a real HTTPS
webhook receiver (trustme CA), real HTTP and WebSocket clients, and svcctl as an operator's shell;
every gRPC call between them over mutual TLS with the development CA (the ``pki`` fixture).

One journey: register an endpoint through the edge, prove it with a signed test delivery, open the
stream, then revoke the key from svcctl and see every consequence: the edge refuses the key, the open
stream closes with 4001, and apikey.revoked reaches the partner's endpoint signed, having travelled
authsvc's outbox -> webhookd -> HTTPS.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from websockets.asyncio.client import connect

from edge.testing import SANDBOX_HOST, edge_args
from svcctl.client import create_demo_key
from svckit.secretbox import new_key
from svckit.tls import channel
from tests.support import ROOT, ServiceProcess, close_code, sqlite_url, start_service, tls_args, tls_of
from travel.auth.v1 import auth_pb2, auth_pb2_grpc
from webhookd import verify
from webhookd.testing import Receiver, trusted_receiver


@dataclass
class Stack:
    authsvc: ServiceProcess
    webhookd: ServiceProcess
    edge: ServiceProcess
    receiver: Receiver
    pki: pathlib.Path

    @property
    def sandbox(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['sandbox_port']}"


@pytest.fixture
def stack(tmp_path: pathlib.Path, pki: pathlib.Path) -> Iterator[Stack]:
    receiver, ca_file = trusted_receiver(tmp_path)
    secrets_key = tmp_path / "webhookd-secrets.key"
    secrets_key.write_text(new_key())
    procs: list[ServiceProcess] = []
    try:
        webhookd = start_service(
            "webhookd", tmp_path, sqlite_url(tmp_path, "webhookd.db"),
            "--allow-private-targets", "--ca-bundle", str(ca_file), "--poll-seconds", "0.2",
            "--secrets-key-file", str(secrets_key), tls=tls_args(pki, "webhookd"),
        )  # fmt: skip
        procs.append(webhookd)
        authsvc = start_service(
            "authsvc", tmp_path, sqlite_url(tmp_path, "authsvc.db"), "--webhookd", webhookd.grpc_target,
            tls=tls_args(pki, "authsvc"),
        )  # fmt: skip
        procs.append(authsvc)
        edge = ServiceProcess(
            "edge",
            edge_args(
                authsvc.grpc_target, webhookd.grpc_target, f"sqlite+aiosqlite:///{tmp_path / 'edge.db'}"
            ),
            tls=tls_args(pki, "edge"),
        ).start(tmp_path / "edge.log")
        procs.append(edge)
        yield Stack(authsvc, webhookd, edge, receiver, pki)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()


def _headers(secret: str, **extra: str) -> dict[str, str]:
    return {"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}", "Accept": "application/json", **extra}


async def _wait_for(predicate: object, within: float) -> None:
    deadline = time.monotonic() + within
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_partner_journey_from_registration_to_revocation(stack: Stack) -> None:
    demo = await create_demo_key(stack.authsvc.grpc_target, tls_of(stack.pki, "svcctl"))
    secret, key_id = demo["secret"], demo["key_id"]
    async with httpx.AsyncClient(base_url=stack.sandbox, timeout=10) as http:
        account = await http.get("/v1/account", headers=_headers(secret))
        assert account.status_code == 200, account.text
        assert account.json()["id"] == demo["account_id"]

        created = await http.post(
            "/v1/webhooks/endpoints",
            headers=_headers(secret, **{"Idempotency-Key": "reg-1"}),
            json={"url": stack.receiver.url("/hooks"), "events": ["apikey.revoked", "booking.confirmed"]},
        )
        assert created.status_code == 201, created.text
        endpoint = created.json()
        signing_secret = endpoint["secret"]
        assert signing_secret.startswith("whsec_")

        test = await http.post(
            f"/v1/webhooks/endpoints/{endpoint['id']}/test",
            headers=_headers(secret, **{"Idempotency-Key": "test-1"}),
        )
        assert test.status_code == 202, test.text
        await _wait_for(lambda: len(stack.receiver.requests) >= 1, 10)
        first = stack.receiver.requests[0]
        verify(first.body, first.headers["x-service-signature"], [signing_secret], time.time())
        assert first.headers["x-service-event-id"] == json.loads(first.body)["id"]

        async with connect(
            f"ws://{SANDBOX_HOST}/v1/stream",
            subprotocols=["svc", secret],  # type: ignore[list-item]
            host="127.0.0.1",
            port=stack.edge.ports["sandbox_port"],
            open_timeout=5,
        ) as stream:
            assert stream.subprotocol == "svc"
            revoked_at = time.monotonic()
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "svcctl", "--authsvc", stack.authsvc.grpc_target,
                *tls_args(stack.pki, "svcctl"), "--actor", "ops:e2e",
                "keys", "revoke", key_id, "--reason", "journey test",
                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(cli.communicate(), 30)
            assert cli.returncode == 0, err.decode()
            assert secret not in (out + err).decode()
            assert await close_code(stream, 5) == 4001
            assert time.monotonic() - revoked_at < 5  # svcctl start-up included; the edge's part is < 1 s

        refused = await http.get("/v1/account", headers=_headers(secret))
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "invalid_api_key"

    # The audit trail names svcctl (from its certificate) and the operator it vouched for.
    async with channel(stack.authsvc.grpc_target, tls_of(stack.pki, "svcctl"), "authsvc") as ch:
        trail = await auth_pb2_grpc.AuthServiceStub(ch).ListAuditEvents(
            auth_pb2.ListAuditEventsRequest(account_id=demo["account_id"]), timeout=10
        )
    revoke = next(e for e in trail.events if e.action == "key.revoked")
    assert (revoke.actor.service, revoke.actor.user) == ("svcctl", "ops:e2e")

    def revoked_deliveries() -> list[dict[str, object]]:
        return [
            json.loads(r.body)
            for r in stack.receiver.requests
            if json.loads(r.body).get("type") == "apikey.revoked"
        ]

    await _wait_for(lambda: len(revoked_deliveries()) >= 1, 15)
    event = revoked_deliveries()[0]
    assert event["account"] == demo["account_id"]
    assert event["livemode"] is False
    raw = next(r for r in stack.receiver.requests if b"apikey.revoked" in r.body)
    verify(raw.body, raw.headers["x-service-signature"], [signing_secret], time.time())
    for proc in (stack.authsvc, stack.webhookd, stack.edge):
        assert secret not in proc.logs()
        assert signing_secret not in proc.logs()
