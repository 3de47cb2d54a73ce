"""A flood of streams opened and closed leaves the edge as it found it (issue 20: edge RSS stayed ~350 MB
up after the soak's stream flood). Each closed stream used to stay reachable for Sanic's timeout check
(30 s by default) with its WebSocket, its session and its StreamEvents call: 3,000 streams grew the edge
by 52 MB, against 3 MB once a closed connection holds nothing. Real authsvc, webhookd and edge processes
on loopback."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from collections.abc import Iterator

import pytest
import websockets

from tests.integration.edge_stack import new_key
from tests.integration.test_edge_stream_webhooks import (  # noqa: F401 (auth: the fixture)
    Stack,
    auth,
    running_stack,
    ws,
)
from travel.auth.v1 import auth_pb2_grpc

STREAMS = 3000
MB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    found = re.search(r"^VmRSS:\s+(\d+) kB", pathlib.Path(f"/proc/{pid}/status").read_text(), re.M)
    assert found is not None
    return int(found.group(1)) * 1024


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # No open-rate limit here: this is about what a closed stream leaves behind, not how fast they open.
    flags = ["--stream-opens-per-second", "0"]
    with running_stack(tmp_path_factory.mktemp("edge_ws_memory"), [], flags) as up:
        yield up


async def test_streams_opened_and_closed_are_not_held(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    assert stack.edge.proc is not None
    edge_pid = stack.edge.proc.pid
    account, first = await new_key(auth, scopes=["account:read"])
    keys = [first.secret] + [(await new_key(auth, account_id=account))[1].secret for _ in range(7)]

    async def open_and_close(key: str, n: int) -> None:
        done = 0
        while done < n:
            try:
                async with ws(stack, ["svc", key]) as conn:
                    await conn.send(json.dumps({"type": "ping"}))
                    assert json.loads(await conn.recv())["type"] in ("pong", "ping")
            except websockets.InvalidStatus as exc:
                # The key's earlier streams may not all have given back their slot yet.
                assert exc.response.status_code == 429
                await asyncio.sleep(0.05)
                continue
            done += 1

    await asyncio.gather(*(open_and_close(k, 50) for k in keys))  # warm: allocator pools, caches
    before = rss_bytes(edge_pid)
    await asyncio.gather(*(open_and_close(k, STREAMS // len(keys)) for k in keys))
    grown = rss_bytes(edge_pid) - before
    assert grown < 20 * MB, f"the edge grew {grown / MB:.0f} MB over {STREAMS} closed streams"
