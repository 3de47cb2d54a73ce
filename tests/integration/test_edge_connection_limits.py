"""Connection limits (svckit.connlimits) at an edge process over real sockets (issue 34: 4,500 keep-alive
connections from 100 loopback addresses, each sending made-up keys back to back, stalled every partner).
Each client binds its own loopback address, as the edge sees it. Past its address's or its /24's cap a
new connection is answered 429 at once and closed, while other addresses are served; an anonymous
connection idles briefly and ends with its first refusal, one a key was accepted on keeps its
keep-alive; near the process's budget anonymous connections are refused (503) while a partner's
address still gets in, up to the budget."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator

import pytest

from edge.testing import SANDBOX_HOST
from tests.integration.edge_stack import new_key
from tests.integration.test_edge_stream_webhooks import Stack, auth, running_stack  # noqa: F401 (auth)
from tests.support import scraped
from travel.auth.v1 import auth_pb2_grpc

PER_ADDRESS, PER_BLOCK, BUDGET = 3, 5, 24  # anonymous connections: half the budget, 12
ANONYMOUS_KEEP_ALIVE = 0.5
WAIT = 15.0  # bounds a wait for the edge to act; far above the timeouts
BAD_KEY = "svc_test_" + "a" * 32 + "xxxxxx"  # its checksum fails: refused 401 by the edge alone


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    flags = ["--metrics-listen", "127.0.0.1:0", "--refusal-delay", "0", "--connections", str(BUDGET),
             "--connections-per-address", str(PER_ADDRESS), "--connections-per-block", str(PER_BLOCK),
             "--anonymous-keep-alive", str(ANONYMOUS_KEEP_ALIVE)]  # fmt: skip
    with running_stack(tmp_path_factory.mktemp("conn_limits"), [], flags) as up:
        yield up


def refused(stack: Stack, limit: str) -> float:
    return scraped(stack.edge.ports["metrics_port"], f'http_connections_refused_total{{limit="{limit}"}}')


def open_from(stack: Stack, address: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(WAIT)
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", stack.edge.ports["sandbox_port"]))
    return sock


def ask(sock: socket.socket, path: str = "/v1/account", key: str | None = None) -> tuple[bytes, bytes]:
    """One GET on ``sock``: the answer's head (lower-cased) and body."""
    auth = f"Authorization: Svc {key}\r\n" if key else ""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {SANDBOX_HOST}\r\n{auth}\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(h for h in head.lower().split(b"\r\n") if h.startswith(b"content-length:")).split(b":")[1]
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head.lower(), body


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the edge sends until its FIN; a socket timeout means no FIN came."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def refusal_of(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), data[:300]
    assert b"connection: close" in head.lower() and b"retry-after: 1" in head.lower(), head
    error = json.loads(body)["error"]
    assert error["requestId"].startswith("req_") and error["docUrl"].endswith(f"/errors#{error['type']}")
    return int(head[9:12]), error, head


@contextlib.contextmanager
def held(socks: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield socks
    finally:
        for s in socks:
            s.close()


async def test_an_address_past_its_cap_is_refused_while_others_are_served(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    before = refused(stack, "address")
    with held([open_from(stack, "127.0.5.1") for _ in range(PER_ADDRESS)]):
        # Answered at accept, before it sends anything...
        with open_from(stack, "127.0.5.1") as s:
            status, error, _ = refusal_of(read_until_closed(s))
        assert status == 429 and error["type"] == "rate_limited" and "your address" in error["message"]
        # ... and a client that sends its request at once reads the same answer (not a reset).
        with open_from(stack, "127.0.5.1") as s:
            s.sendall(f"GET /v1/account HTTP/1.1\r\nHost: {SANDBOX_HOST}\r\n\r\n".encode())
            status, error, _ = refusal_of(read_until_closed(s))
        assert status == 429 and error["type"] == "rate_limited"
        assert refused(stack, "address") == before + 2

        # Meanwhile another address of the same /24, and a partner, are served.
        with open_from(stack, "127.0.5.2") as other:
            assert ask(other, "/openapi.json")[0].startswith(b"http/1.1 200 ")
        with open_from(stack, "127.0.0.1") as partner:
            for _ in range(3):
                assert ask(partner, key=key.secret)[0].startswith(b"http/1.1 200 ")


def test_a_block_past_its_cap_is_refused(stack: Stack) -> None:
    before = refused(stack, "block")
    with held([open_from(stack, f"127.0.6.{i}") for i in range(1, PER_BLOCK + 1)]):
        with open_from(stack, f"127.0.6.{PER_BLOCK + 1}") as s:
            status, error, _ = refusal_of(read_until_closed(s))
        assert status == 429 and "your network" in error["message"]
        assert refused(stack, "block") == before + 1
        with open_from(stack, "127.0.7.1") as elsewhere:  # another /24
            assert ask(elsewhere, "/openapi.json")[0].startswith(b"http/1.1 200 ")


async def test_an_anonymous_connection_idles_briefly_and_ends_with_its_first_refusal(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    with open_from(stack, "127.0.8.1") as anonymous, open_from(stack, "127.0.8.2") as partner:
        head, _ = ask(anonymous, "/openapi.json")
        assert head.startswith(b"http/1.1 200 ") and b"connection: keep-alive" in head
        assert ask(partner, key=key.secret)[0].startswith(b"http/1.1 200 ")
        # Idle: the anonymous connection is closed at its short keep-alive (a FIN, nothing sent) ...
        assert read_until_closed(anonymous) == b""
        # ... while the one a key was accepted on, idle as long and longer, is still served.
        await asyncio.sleep(4 * ANONYMOUS_KEEP_ALIVE)
        assert ask(partner, key=key.secret)[0].startswith(b"http/1.1 200 ")

    with open_from(stack, "127.0.8.3") as flooder:
        head, body = ask(flooder, key=BAD_KEY)
        assert head.startswith(b"http/1.1 401 ") and b"connection: close" in head
        assert json.loads(body)["error"]["type"] == "invalid_api_key"
        assert read_until_closed(flooder) == b""


def opened(stack: Stack, addresses: list[str]) -> tuple[list[socket.socket], list[bytes]]:
    """A connection from each address, all open at once, each sent a request head short of its last
    CRLF (an admitted one waits for it, silent); then each completed in turn: the ones admitted (kept
    open) and the refusals the others were answered at accept (read whole)."""
    socks = []
    for address in addresses:
        s = open_from(stack, address)
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: {SANDBOX_HOST}\r\n".encode())
        socks.append(s)
    admitted, refusals = [], []
    for s in socks:
        with contextlib.suppress(OSError):  # a refused one may be closed already
            s.sendall(b"\r\n")
        first = s.recv(65536)
        if first.startswith(b"HTTP/1.1 200 "):
            admitted.append(s)
        else:
            refusals.append(first + read_until_closed(s))
            s.close()
    return admitted, refusals


async def test_near_the_budget_anonymous_connections_are_shed_and_a_partner_still_gets_in(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    with open_from(stack, "127.0.0.1") as partner:  # its address presented an accepted key: trusted
        assert ask(partner, key=key.secret)[0].startswith(b"http/1.1 200 ")
    shed_before, budget_before = refused(stack, "anonymous"), refused(stack, "budget")
    # One connection from each of many /24s (within every per-address and per-block cap): the anonymous
    # half of the budget is served, the rest shed.
    anonymous, refusals = opened(stack, [f"127.1.{n}.1" for n in range(1, BUDGET + 1)])
    with held(anonymous):
        assert 1 <= len(anonymous) <= BUDGET // 2 and refusals
        for data in refusals:
            status, error, _ = refusal_of(data)
            assert status == 503 and error["type"] == "service_unavailable"
            assert "without an accepted credential" in error["message"]
        assert refused(stack, "anonymous") == shed_before + len(refusals)

        # The partner's address still gets in, up to the whole budget.
        partners, refusals = opened(stack, ["127.0.0.1"] * BUDGET)
        with held(partners):
            assert partners and len(anonymous) + len(partners) <= BUDGET
            for data in refusals:
                status, error, _ = refusal_of(data)
                assert status == 503 and "connection limit" in error["message"]
            assert refused(stack, "budget") == budget_before + len(refusals)
            assert ask(partners[0], key=key.secret)[0].startswith(b"http/1.1 200 ")
