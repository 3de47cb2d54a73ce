"""``svc webhooks`` end to end, as a partner runs it after an outage, against real authsvc, webhookd and edge
processes and a real HTTPS receiver: the v1a public keys, the events an endpoint missed, a dry-run
recovery that only counts (nothing changes), then the recovery that delivers them."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from svcctl.client import create_demo_key
from tests.e2e.test_svc_cli import Stack, run_cli
from tests.support import ServiceProcess, free_port, sqlite_url, start_service
from webhookd.testing import Receiver, trusted_receiver


@pytest.fixture
def stack(tmp_path: pathlib.Path) -> Iterator[tuple[Stack, Receiver]]:
    receiver, ca = trusted_receiver(tmp_path)
    procs: list[ServiceProcess] = []
    try:
        wh = start_service(
            "webhookd", tmp_path, sqlite_url(tmp_path, "w.db"),
            "--poll-seconds", "0.1", "--allow-private-targets", "--ca-bundle", str(ca),
        )  # fmt: skip
        procs.append(wh)
        auth = start_service("authsvc", tmp_path, sqlite_url(tmp_path, "a.db"))
        procs.append(auth)
        s = Stack(tmp_path, auth, wh, wh, free_port())
        s.start_edge()
        procs.append(s.edge)
        yield s, receiver
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()


def svc(key: str, stack: Stack, *args: str, code: int = 0) -> list[str]:
    done: subprocess.CompletedProcess[bytes] = run_cli(key, "--base-url", stack.base, "webhooks", *args)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert key.encode() not in done.stdout + done.stderr
    return (done.stdout if code == 0 else done.stderr).decode().splitlines()


async def test_signing_keys_undelivered_events_and_a_dry_run_recovery(stack: tuple[Stack, Receiver]) -> None:
    s, receiver = stack
    demo = await create_demo_key(s.authsvc.grpc_target, None)
    key = demo["secret"]
    api = httpx.AsyncClient(base_url=s.base, headers={"Authorization": f"Svc {key}"}, timeout=30)

    async def post(path: str, body: dict[str, object], status: int) -> dict[str, object]:
        resp = await api.post(path, headers={"Idempotency-Key": f"t-{time.time_ns()}"}, json=body)
        assert resp.status_code == status, resp.text
        out: dict[str, object] = resp.json()
        return out

    async with api:
        made = await post(
            "/v1/webhooks/endpoints",
            {"url": receiver.url("/gone"), "events": ["booking.confirmed"], "signatureScheme": "standard"},
            201,
        )
        ep = str(made["id"])
        keys = await asyncio.to_thread(svc, key, s, "signing-keys", "--endpoint", ep)
        assert len(keys) == 1 and keys[0].startswith(f"{ep} ed25519 whpk_") and keys[0].endswith("(current)")

        # The receiver answers 410: the endpoint is disabled, the first event failed, the next held.
        receiver.responder = lambda _r: 410
        first = await post("/v1/sandbox/events", {"type": "booking.confirmed"}, 202)
        deadline = time.monotonic() + 15
        while (await api.get(f"/v1/webhooks/endpoints/{ep}")).json()["status"] != "disabled":
            assert time.monotonic() < deadline, "the 410 did not disable the endpoint"
            await asyncio.sleep(0.05)
        second = await post("/v1/sandbox/events", {"type": "booking.confirmed"}, 202)
        ids = [str(e["event"]["id"]) for e in (second, first)]  # type: ignore[index]
        missed = await asyncio.to_thread(svc, key, s, "events", "--undelivered-to", ep)
        assert [line.split()[0] for line in missed] == ids

        async def statuses() -> list[str]:
            got = (await api.get("/v1/webhooks/deliveries", params={"endpoint": ep})).json()["data"]
            return sorted(d["status"] for d in got)

        before = await statuses()
        assert before == ["failed", "held"]
        dry = await asyncio.to_thread(svc, key, s, "recover", ep, "--since", "1h", "--dry-run")
        assert (
            dry[0].startswith(f"2 deliveries of {ep} would be queued again") and "nothing changed" in dry[0]
        )
        assert await statuses() == before
        assert receiver.count == 1  # the one 410

        receiver.responder = lambda _r: 200
        await post(f"/v1/webhooks/endpoints/{ep}/enable", {}, 200)
        done = await asyncio.to_thread(svc, key, s, "recover", ep, "--since", "1h")
        assert done[0].startswith(f"2 deliveries of {ep} queued again")
        await receiver.wait_for(3, 15)
        deadline = time.monotonic() + 15
        while await asyncio.to_thread(svc, key, s, "events", "--undelivered-to", ep):
            assert time.monotonic() < deadline, "the recovered events are still undelivered"
            await asyncio.sleep(0.05)

    # Refusals say what the edge said, on stderr, with exit code 1.
    err = await asyncio.to_thread(svc, key, s, "recover", "we_nosuchendpoint00000000000", "--dry-run", code=1)
    assert "HTTP 4" in err[0]


async def test_svc_adds_a_rabbitmq_endpoint_that_gets_signed_events(
    stack: tuple[Stack, Receiver], tmp_path: pathlib.Path
) -> None:
    """``svc webhooks add --amqp-url ...`` with the password from a file, ``svc webhooks endpoints`` shows
    where it delivers, and a sandbox event arrives in the partner's RabbitMQ queue, signed."""
    import json
    import uuid

    import aio_pika

    from svckit.signing import verify

    s, _receiver = stack
    key = (await create_demo_key(s.authsvc.grpc_target, None))["secret"]
    name = f"wt.svc.{uuid.uuid4().hex[:10]}"
    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    try:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.DIRECT, auto_delete=True)
        queue = await channel.declare_queue(name, exclusive=True)
        await queue.bind(exchange, "bookings")
        (tmp_path / "amqp.pw").write_text("guest\n")
        pw = str(tmp_path / "amqp.pw")
        added = await asyncio.to_thread(
            svc, key, s, "add", "--event", "booking.confirmed", "--amqp-url", "amqp://guest@127.0.0.1:5672/%2F",
            "--amqp-exchange", name, "--amqp-routing-key", "bookings", "--password-file", pw,
        )  # fmt: skip
        ep, status, kind = added[0].split()[:3]
        assert (status, kind) == ("enabled", "amqp") and f"exchange {name} routing key bookings" in added[0]
        secret = added[1].rsplit(" ", 1)[1]
        listed = await asyncio.to_thread(svc, key, s, "endpoints")
        assert listed == [added[0]]
        refused = await asyncio.to_thread(svc, key, s, "add", "--event", "booking.confirmed", "--amqp-url",
                                          "http://127.0.0.1/", code=1)  # fmt: skip
        assert "amqp.url" in refused[0]
        async with httpx.AsyncClient(base_url=s.base, headers={"Authorization": f"Svc {key}"}) as api:
            resp = await api.post(
                "/v1/sandbox/events",
                headers={"Idempotency-Key": uuid.uuid4().hex},
                json={"type": "booking.confirmed"},
            )
            assert resp.status_code == 202, resp.text
        message = None
        deadline = time.monotonic() + 15
        while message is None and time.monotonic() < deadline:
            message = await queue.get(no_ack=True, fail=False)
            await asyncio.sleep(0.05)
        assert message is not None, s.webhookd.logs()[-2000:]
        assert (
            message.message_id == resp.json()["event"]["id"]
            and json.loads(message.body)["type"] == "booking.confirmed"
        )
        headers = message.headers or {}
        verify(message.body, str(headers["X-Service-Signature"]), secret, time.time())
        assert ep.startswith("we_")
    finally:
        await connection.close()
