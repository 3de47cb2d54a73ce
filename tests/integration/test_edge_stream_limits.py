"""What one tenant can do to the edge, and what it must not do to another (issue "no tenant can hurt
another", items 4-6): /v1/stream's per-key and per-account limits, its per-connection message rate, and
refused requests logged as counts, never a line each. Real authsvc, webhookd and edge processes on
loopback; the edge's limits are small here so that the tests open few streams."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from edge.streamlimits import CLOSE_RATE_LIMITED
from svckit.refusallog import SUMMARY
from tests.integration.edge_stack import hdrs, new_key
from tests.integration.test_edge_stream_webhooks import (  # noqa: F401 (auth, hooks: the fixtures)
    Stack,
    auth,
    hooks,
    publish,
    recv_json,
    running_stack,
    ws,
)
from tests.support import close_code
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2_grpc

PER_KEY = 2
PER_ACCOUNT = 3
BURST = 10


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # Refusals answered at once (--refusal-delay 0): the floods here are the log's and the limits' worst
    # case, as an edge run without pacing meets them (pacing: test_edge_refusal_pacing.py).
    limits = ["--stream-max-per-key", str(PER_KEY), "--stream-max-per-account", str(PER_ACCOUNT),
              "--stream-messages-per-second", "2", "--stream-message-burst", str(BURST),
              "--refusal-delay", "0"]  # fmt: skip
    with running_stack(tmp_path_factory.mktemp("edge_limits"), [], limits) as up:
        yield up


async def refused_handshake(stack: Stack, secret: str) -> tuple[int, dict[str, Any], str]:
    """The HTTP answer to a handshake the edge refuses: status, body, Retry-After."""
    with pytest.raises(websockets.InvalidStatus) as info:
        async with ws(stack, ["svc", secret]):
            pass
    resp = info.value.response
    return resp.status_code, json.loads(resp.body), resp.headers.get("Retry-After", "")


async def opened(stack: Stack, secret: str, stack_of: contextlib.AsyncExitStack) -> ClientConnection:
    conn: ClientConnection = await stack_of.enter_async_context(ws(stack, ["svc", secret]))
    await conn.send(json.dumps({"type": "ping"}))
    assert (await recv_json(conn)) == {"type": "pong"}  # admitted and served, not closed with 4429
    return conn


async def test_streams_over_the_key_or_account_limit_are_refused_429_and_others_still_open(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    account, first = await new_key(auth, scopes=["account:read"])
    _, second = await new_key(auth, scopes=["account:read"], account_id=account)
    _, third = await new_key(auth, scopes=["account:read"], account_id=account)
    _, other = await new_key(auth, scopes=["account:read"])  # another account
    async with contextlib.AsyncExitStack() as streams:
        held = [await opened(stack, first.secret, streams) for _ in range(PER_KEY)]
        status, body, retry = await refused_handshake(stack, first.secret)
        assert status == 429 and body["error"]["type"] == "rate_limited", body
        assert "this API key already has 2 open streams" in body["error"]["message"]
        assert retry and int(retry) >= 1
        # Another key of the account: its first stream opens (the account's third), then the account is full.
        await opened(stack, second.secret, streams)
        status, body, _ = await refused_handshake(stack, third.secret)
        assert status == 429 and "this account already has 3 open streams" in body["error"]["message"]
        # Another account is not affected by this one's streams.
        for _ in range(PER_KEY):
            await opened(stack, other.secret, streams)
        # The held streams still work.
        for conn in held:
            await conn.send(json.dumps({"type": "ping"}))
            assert (await recv_json(conn)) == {"type": "pong"}
        # A closed stream frees its slot (once the edge has seen the close).
        await held[0].close()
        for _ in range(100):
            with contextlib.suppress(websockets.InvalidStatus):
                await opened(stack, first.secret, streams)
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the slot of a closed stream was never freed")


async def test_a_ping_flood_closes_that_stream_with_1008_and_no_other_tenant_notices(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, hooks: webhooks_pb2_grpc.WebhookServiceStub
) -> None:
    _, flooder = await new_key(auth, scopes=["account:read"])
    calm_account, calm = await new_key(auth, scopes=["hotels:read"])
    _, reader = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", calm.secret]) as quiet, ws(stack, ["svc", flooder.secret]) as loud:
        await quiet.send(json.dumps({"type": "subscribe", "events": ["booking.*"]}))
        assert (await recv_json(quiet))["type"] == "subscribed"
        sent = 0
        with contextlib.suppress(websockets.ConnectionClosed):
            for _ in range(20 * BURST):
                await loud.send(json.dumps({"type": "ping"}))
                sent += 1
        assert sent > BURST  # the bucket's burst was served before the close
        code = await close_code(loud, 10.0)
        assert code == 1008, (code, loud.close_reason, sent)
        assert loud.close_reason.startswith("rate_limited"), loud.close_reason
        # The calm tenant's stream still gets its events, and its plain requests are answered.
        event = await publish(hooks, calm_account, "booking.confirmed", "hotels")
        assert (await recv_json(quiet, within=10.0))["event"]["id"] == event.id
        async with httpx.AsyncClient(timeout=10) as http:
            got = await http.get(stack.sandbox + "/v1/account", headers=hdrs(reader.secret))
        assert got.status_code == 200, got.text


async def test_a_flood_of_websocket_ping_frames_is_counted_and_closed_with_1008(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    """Ping frames (RFC 6455 control frames, answered by the WebSocket layer itself, never by the stream's
    reader) take from the same message bucket as JSON messages: a flood of them is closed too."""
    _, flooder = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", flooder.secret]) as loud:
        sent = 0
        deadline = time.monotonic() + 15  # pings until the server closes (on a slow machine, a while)
        with contextlib.suppress(websockets.ConnectionClosed):
            while time.monotonic() < deadline:
                await loud.ping(str(sent))
                sent += 1
                if sent % 20 == 0:
                    await asyncio.sleep(0.01)
        assert sent > BURST
        code = await close_code(loud, 10.0)
        assert code == 1008, (code, loud.close_reason, sent)
        assert loud.close_reason.startswith("rate_limited"), loud.close_reason


async def test_a_stream_accepted_over_the_limit_is_closed_with_4429(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    """Handshakes racing past the check before the upgrade: at most the limit are served, the rest are
    refused 429 or closed with 4429, never served."""
    _, key = await new_key(auth, scopes=["account:read"])

    async def attempt() -> str:
        try:
            async with ws(stack, ["svc", key.secret]) as conn:
                await conn.send(json.dumps({"type": "ping"}))
                try:
                    msg = await recv_json(conn)
                except websockets.ConnectionClosed as closed:
                    assert closed.rcvd is not None and closed.rcvd.code == CLOSE_RATE_LIMITED
                    return "closed"
                assert msg == {"type": "pong"}
                await release.wait()
                return "served"
        except websockets.InvalidStatus as refused:
            assert refused.response.status_code == 429
            return "refused"
        except websockets.ConnectionClosed as closed:  # closed before (or while) the ping was sent
            assert closed.rcvd is not None and closed.rcvd.code == CLOSE_RATE_LIMITED
            return "closed"

    release = asyncio.Event()
    tasks = [asyncio.ensure_future(attempt()) for _ in range(8)]
    done = 0
    while done < 8 - PER_KEY:  # every attempt but the served ones finishes on its own
        done = sum(t.done() for t in tasks)
        await asyncio.sleep(0.05)
    release.set()
    outcomes = await asyncio.gather(*tasks)
    assert outcomes.count("served") == PER_KEY, outcomes
    assert outcomes.count("refused") + outcomes.count("closed") == 8 - PER_KEY


def _summaries(log_path: pathlib.Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("msg") == SUMMARY]


async def test_a_flood_of_refused_requests_is_a_handful_of_log_lines(stack: Stack) -> None:
    assert stack.edge.log_path is not None
    before = len(_summaries(stack.edge.log_path))
    total_before = sum(s["counts"].get("invalid_api_key", 0) for s in _summaries(stack.edge.log_path))
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=20)) as http:
        bad = hdrs("svc_test_" + "x" * 32)
        gate = asyncio.Semaphore(20)

        async def one() -> int:
            async with gate:
                return (await http.get(stack.sandbox + "/v1/account", headers=bad)).status_code

        statuses = await asyncio.gather(*(one() for _ in range(2000)))
    elapsed = time.monotonic() - started
    assert set(statuses) == {401}
    # Every refusal is counted in some summary (the last one a second after the one before it at most).
    for _ in range(100):
        summaries = _summaries(stack.edge.log_path)[before:]
        counted = sum(s["counts"].get("invalid_api_key", 0) for s in summaries)
        if counted + total_before >= total_before + 2000:
            break
        await asyncio.sleep(0.1)
    assert counted == 2000, summaries
    # At most a line a second while it lasted (and the tail's), not one per request.
    assert len(summaries) <= math.ceil(elapsed) + 2, (len(summaries), elapsed)
    assert all("path" not in s and "request_id" not in s for s in summaries)
