"""The sandbox clock through real processes: authsvc, webhookd (with a real SMTP server for the disable
alert), an edge, a receiver that answers 500 and then 200, and ``svc clock advance``.

A sandbox event's delivery fails; advancing the clock 1m, 5m, 30m, 2h, 6h, 24h brings each retry of the
real schedule to now, until the 7th attempt fails, the endpoint is disabled and the alert e-mail goes
out, all in seconds; enabling and recovering it then delivers against a receiver that answers 200. A live
delivery of the same account, failed at the same time, is never brought forward. Only the public API is
used: nothing is written to a database, no interval is shortened.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from typing import Any

import grpc
import httpx
import pytest
from aiosmtpd.controller import Controller

from edge.testing import LIVE_HOST, SANDBOX_HOSTS, edge_args
from svckit.scopes import ALL_SCOPES
from tests.support import ROOT, ServiceProcess, event_data, free_port, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd.testing import Received, Receiver

ACTOR = apb.Actor(user="ops@partner.example")
ALERT_TO = "alerts@partner.example"
STEPS = ("1m", "5m", "30m", "2h", "6h", "24h")  # the retry schedule: attempts 2..7
_keys = itertools.count()


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


@dataclass
class Stack:
    webhookd: ServiceProcess
    edge: ServiceProcess
    sandbox: str  # the sandbox's base URL (its host is one of the edge's sandbox hosts)
    inbox: Inbox
    answer: dict[str, int] = field(default_factory=lambda: {"status": 500})
    receiver: Receiver | None = None
    account_id: str = ""
    test_key: str = ""
    live_key: str = ""

    @property
    def live(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['live_port']}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("clock")
    inbox = Inbox()
    smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    procs: list[ServiceProcess] = []
    receiver: Receiver | None = None
    try:
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"), "--allow-private-targets", "--allow-http",
            "--poll-seconds", "0.1", "--smtp", f"127.0.0.1:{smtp.port}", "--alert-email", ALERT_TO,
        )  # fmt: skip
        procs.append(wh)
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        host = f"127.0.0.1:{free_port()}"
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge.db"), None,
                "--sandbox-listen", host, "--sandbox-hosts", f"{SANDBOX_HOSTS},{host}",
                "--rate-limit-sandbox", "0",
            ),
        ).start(tmp / "edge.log")  # fmt: skip
        procs.append(edge)
        s = Stack(wh, edge, f"http://{host}", inbox)
        receiver = Receiver(None, responder=lambda _r: s.answer["status"]).start()
        s.receiver = receiver
        asyncio.run(_partner(s, auth.grpc_target))
        yield s
    finally:
        for proc in reversed(procs):
            proc.terminate()
        if receiver is not None:
            receiver.stop()
        smtp.stop()


async def _partner(s: Stack, authsvc: str) -> None:
    async with grpc.aio.insecure_channel(authsvc) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        account = (
            await stub.CreateAccount(
                apb.CreateAccountRequest(name="Clock", mode=apb.ACCOUNT_MODE_A, actor=ACTOR)
            )
        ).account
        s.account_id = account.id
        for env in (apb.ENVIRONMENT_SANDBOX, apb.ENVIRONMENT_LIVE):
            created = await stub.CreateKey(
                apb.CreateKeyRequest(
                    account_id=account.id, environment=env, name="k", scopes=list(ALL_SCOPES), actor=ACTOR
                )
            )
            if env == apb.ENVIRONMENT_SANDBOX:
                s.test_key = created.secret
            else:
                s.live_key = created.secret


def hdrs(key: str, *, live: bool = False, post: bool = False) -> dict[str, str]:
    out = {"Authorization": f"Svc {key}", "Accept": "application/json"}
    if live:
        out["Host"] = LIVE_HOST
    if post:
        out["Idempotency-Key"] = f"clock-{time.time_ns()}-{next(_keys)}"
    return out


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.sandbox, timeout=30) as client:
        yield client


def received(stack: Stack, path: str) -> list[Received]:
    assert stack.receiver is not None
    return [r for r in stack.receiver.received() if r.path == path]


async def until(what: str, check: Any, within: float = 15.0) -> Any:
    """Poll the coroutine function ``check`` until it answers something truthy."""
    deadline = time.monotonic() + within
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def delivery(http: httpx.AsyncClient, key: str, event_id: str, *, live: bool = False) -> dict[str, Any]:
    resp = await http.get("/v1/webhooks/deliveries", params={"event": event_id}, headers=hdrs(key, live=live))
    assert resp.status_code == 200, resp.text
    [d] = resp.json()["data"]
    return d  # type: ignore[no-any-return]


async def advance(http: httpx.AsyncClient, stack: Stack, by: str) -> dict[str, Any]:
    resp = await http.post(
        "/v1/sandbox/clock/advance", headers=hdrs(stack.test_key, post=True), json={"by": by}
    )
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def svc(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "svccli", "--api-key", stack.test_key, "--base-url", stack.sandbox, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def test_the_route_is_the_sandboxs_and_checks_its_span(stack: Stack, http: httpx.AsyncClient) -> None:
    bad = {
        "": "the field by is required",
        "2": "not a duration",
        "0s": "out of range",
        "8d": "out of range",
        "1h1h": "",
    }
    for text, message in bad.items():
        body = {"by": text} if text else {}
        resp = await http.post(
            "/v1/sandbox/clock/advance", headers=hdrs(stack.test_key, post=True), json=body
        )
        assert resp.status_code == 400, (text, resp.text)
        assert resp.json()["error"]["type"] == "invalid_request"
        assert message in resp.json()["error"]["message"]
    no_key = await http.post(
        "/v1/sandbox/clock/advance", headers={"Idempotency-Key": "clock-no-key"}, json={"by": "1h"}
    )
    assert no_key.status_code == 401
    # A POST needs its Idempotency-Key, as every POST.
    unkeyed = await http.post("/v1/sandbox/clock/advance", headers=hdrs(stack.test_key), json={"by": "1h"})
    assert unkeyed.status_code == 400, unkeyed.text
    # The live host has no sandbox clock.
    async with httpx.AsyncClient(base_url=stack.live, timeout=30) as live:
        resp = await live.post(
            "/v1/sandbox/clock/advance", headers=hdrs(stack.live_key, live=True, post=True), json={"by": "1h"}
        )
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["type"] == "not_found"
    # svc checks the span before it calls.
    refused = svc(stack, "clock", "advance", "8d")
    assert refused.returncode == 2 and "out of range" in refused.stderr


async def test_advancing_walks_the_retry_schedule_to_the_disable_and_recovery(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    started = time.monotonic()
    stack.answer["status"] = 500
    assert stack.receiver is not None
    created = await http.post(
        "/v1/webhooks/endpoints",
        headers=hdrs(stack.test_key, post=True),
        json={"url": stack.receiver.url("/sandbox"), "events": ["booking.confirmed"]},
    )
    assert created.status_code == 201, created.text
    endpoint_id = created.json()["id"]
    async with httpx.AsyncClient(base_url=stack.live, timeout=30) as live_http:
        live_ep = await live_http.post(
            "/v1/webhooks/endpoints",
            headers=hdrs(stack.live_key, live=True, post=True),
            json={"url": stack.receiver.url("/live"), "events": ["booking.confirmed"]},
        )
        assert live_ep.status_code == 201, live_ep.text
        # A live event of the same account, published as a product service would (the edge may not).
        async with grpc.aio.insecure_channel(stack.webhookd.grpc_target) as channel:
            published = await webhooks_pb2_grpc.WebhookServiceStub(channel).PublishEvent(
                wpb.PublishEventRequest(
                    account_id=stack.account_id,
                    environment=wpb.ENVIRONMENT_LIVE,
                    type="booking.confirmed",
                    data=event_data("booking.confirmed"),
                )
            )
        live_event = published.event.id
        sample = await http.post(
            "/v1/sandbox/events", headers=hdrs(stack.test_key, post=True), json={"type": "booking.confirmed"}
        )
        assert sample.status_code == 202, sample.text
        event_id = sample.json()["event"]["id"]

        async def failed(n: int) -> dict[str, Any] | None:
            """The sandbox delivery once its ``n``-th attempt failed and was recorded."""
            d = await delivery(http, stack.test_key, event_id)
            return d if d["attemptCount"] == n and d["status"] in ("pending", "failed") else None

        first = await until("the first attempt", lambda: failed(1))
        live_first = await until(
            "the live first attempt",
            lambda: _recorded(delivery(live_http, stack.live_key, live_event, live=True)),
        )
        assert live_first["status"] == "pending"

        # Each retry of the real schedule, brought to now: 1m with svc, the rest through the API.
        assert first["status"] == "pending"
        out = svc(stack, "clock", "advance", "1m")
        assert out.returncode == 0, out.stderr
        assert "Advanced the sandbox clock by 1m: 1 delivery due now" in out.stdout
        await until("attempt 2", lambda: failed(2))
        for n, by in enumerate(STEPS[1:], start=3):
            answer = await advance(http, stack, by)
            # The span as the API spells it back, largest unit first: 24h is 1d.
            spelled_back = "1d" if by == "24h" else by
            assert answer == {"object": "sandbox_clock", "advancedBy": spelled_back, "deliveriesDue": 1}
            await until(f"attempt {n}", lambda n=n: failed(n))

        # The 7th attempt failed: the delivery failed, the endpoint is disabled, the alert went out.
        last = await delivery(http, stack.test_key, event_id)
        assert (last["status"], last["attemptCount"]) == ("failed", 7)
        assert len(received(stack, "/sandbox")) == 7
        ep = (await http.get(f"/v1/webhooks/endpoints/{endpoint_id}", headers=hdrs(stack.test_key))).json()
        assert ep["status"] == "disabled"
        mail = await until("the disable alert", lambda: _inbox(stack))
        assert mail[0][0] == [ALERT_TO]
        assert endpoint_id in mail[0][1].as_string()

        # Advancing now finds nothing; and the live delivery was never brought forward.
        assert (await advance(http, stack, "7d"))["deliveriesDue"] == 0
        live_now = await delivery(live_http, stack.live_key, live_event, live=True)
        assert (live_now["attemptCount"], live_now["nextAttempt"]) == (1, live_first["nextAttempt"])
        assert len(received(stack, "/live")) == 1

    # Recovery: the receiver is fixed, the endpoint enabled, what it missed re-sent.
    stack.answer["status"] = 200
    enable = f"/v1/webhooks/endpoints/{endpoint_id}/enable"
    enabled = await http.post(enable, headers=hdrs(stack.test_key, post=True), json={})
    assert enabled.status_code == 200, enabled.text
    recovered = await http.post(
        f"/v1/webhooks/endpoints/{endpoint_id}/recover",
        headers=hdrs(stack.test_key, post=True),
        json={"since": sample.json()["event"]["created"]},
    )
    assert recovered.status_code == 200, recovered.text
    assert recovered.json()["recovered"] == 1

    async def succeeded() -> bool:
        return bool((await delivery(http, stack.test_key, event_id))["status"] == "succeeded")

    await until("the recovered delivery", succeeded)
    assert len(received(stack, "/sandbox")) == 8
    assert time.monotonic() - started < 45  # a day and a half of schedule in seconds


async def _recorded(d: Any) -> dict[str, Any] | None:
    got: dict[str, Any] = await d
    return got if got["attemptCount"] == 1 else None


async def _inbox(stack: Stack) -> list[Any]:
    """The disable e-mails (the failing ones at 50 % and 90 % come before them)."""
    return [m for m in stack.inbox.messages if "failing" not in str(m[1]["Subject"])]
