"""Floods of WebSocket frames on /v1/stream cost the edge their burst, not their size (issue 20, noisy
neighbours): the edge parses a client's bytes in bounded slices, admits each slice's frames through the
stream's message bucket, and after closing the client with 1008 parses nothing more; what the client still
sends is dropped unparsed, and the client still reads the close frame and a clean end of the connection.
The work is counted, not timed: the edge logs the frames it parsed on each stream it closes, and the
pongs a client gets back are the pings admitted. Raw sockets against real authsvc, webhookd and edge
processes."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from edge.testing import SANDBOX_HOST
from edge.wsintake import SLICE_BYTES
from tests.integration.edge_stack import new_key
from tests.integration.test_edge_stream_webhooks import (  # noqa: F401 (auth: the fixture)
    Stack,
    auth,
    running_stack,
)
from travel.auth.v1 import auth_pb2_grpc

BURST = 10
# The frames one slice can hold at most (a masked empty frame is 6 bytes): what is parsed past a refusal.
PER_SLICE = SLICE_BYTES // 6
PING, PONG, CLOSE, TEXT, BINARY, CONT = 0x9, 0xA, 0x8, 0x1, 0x2, 0x0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    limits = ["--stream-messages-per-second", "2", "--stream-message-burst", str(BURST)]
    with running_stack(tmp_path_factory.mktemp("edge_flood"), [], limits) as up:
        yield up


def frame(opcode: int, payload: bytes = b"", fin: bool = True) -> bytes:
    """A client frame (masked, as RFC 6455 requires of clients), payload under 126 bytes."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([(0x80 if fin else 0) | opcode, 0x80 | len(payload)]) + mask + masked


@dataclass
class Answer:
    """What the edge sent back after the handshake, read until it closed the connection."""

    pongs: int = 0
    close_code: int | None = None
    texts: list[str] = field(default_factory=list)
    reset: bool = False


async def upgraded(stack: Stack, secret: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to /v1/stream past its handshake (101 read)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", stack.edge.ports["sandbox_port"])
    nonce = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET /v1/stream HTTP/1.1\r\nHost: {SANDBOX_HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {nonce}\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: svc, {secret}\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 "), head
    return reader, writer


async def flood(stack: Stack, secret: str, frames: bytes) -> Answer:
    """Upgrade to a stream, send ``frames`` at once, then read every frame the edge sends until EOF."""
    reader, writer = await upgraded(stack, secret)
    writer.write(frames)
    sending = asyncio.ensure_future(writer.drain())
    answer = Answer()
    try:
        while True:
            first, second = await asyncio.wait_for(reader.readexactly(2), 30)
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await reader.readexactly(8))
            payload = await reader.readexactly(size)
            opcode = first & 0x0F
            if opcode == PONG:
                answer.pongs += 1
            elif opcode == TEXT:
                answer.texts.append(payload.decode())
            elif opcode == CLOSE and answer.close_code is None:
                (answer.close_code,) = struct.unpack("!H", payload[:2])
    except asyncio.IncompleteReadError as eof:
        assert not eof.partial, eof.partial  # the connection ended between frames
    except ConnectionResetError:
        answer.reset = True
    sending.cancel()
    writer.close()
    return answer


async def closed_stream(stack: Stack, key_id: str) -> dict[str, Any]:
    """The edge's "stream closed" log line of the key's stream."""
    assert stack.edge.log_path is not None
    for _ in range(100):
        for line in stack.edge.log_path.read_text().splitlines():
            if line.startswith("{") and '"stream closed"' in line:
                record = json.loads(line)
                if record.get("key_id") == key_id:
                    return record  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no stream closed line for {key_id}")


async def test_a_burst_of_pings_is_parsed_no_further_than_the_bucket_and_one_slice(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    """20,000 pings in one write: the edge parses the bucket's burst of them and at most one slice more,
    answers the burst, closes with 1008, drops the rest unparsed (counted), and ends the connection cleanly
    (no reset that could lose the close frame). Before edge.wsintake it parsed and answered every one."""
    _, flooder = await new_key(auth, scopes=["account:read"])
    pings = 20_000
    answer = await flood(stack, flooder.secret, frame(PING) * pings)
    assert answer.close_code == 1008, answer
    assert answer.pongs == BURST, (answer.pongs, pings)
    assert not answer.reset, answer
    closed = await closed_stream(stack, flooder.key.id)
    assert closed["code"] == 1008, closed
    assert BURST < closed["frames"] <= BURST + PER_SLICE, closed
    assert closed["discarded_bytes"] > 0, closed  # the rest arrived, and was dropped unparsed


async def test_a_message_in_a_thousand_fragments_is_a_thousand_frames(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    """Each fragment costs a parse: a message split into 1,000 one-byte fragments is closed with 1008 at
    the bucket's burst (before, it was one message, parsed to the end and answered)."""
    _, client = await new_key(auth, scopes=["account:read"])
    fragments = frame(TEXT, b"{", fin=False) + frame(CONT, b" ", fin=False) * 998 + frame(CONT, b"}")
    answer = await flood(stack, client.secret, fragments)
    assert answer.close_code == 1008, answer
    assert not any(json.loads(text).get("type") == "error" for text in answer.texts), answer.texts


async def test_a_message_over_the_size_limit_is_closed_1009_and_the_rest_dropped_unread(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    """A 4 MiB message (the limit is 16 KiB): the parser refuses it at its header with 1009; the 4 MiB
    that follow are dropped unparsed and the client reads the close frame and a clean end (before, the
    edge closed at once with the data unread: a reset)."""
    _, client = await new_key(auth, scopes=["account:read"])
    size = 4 * 1024 * 1024
    header = bytes([0x80 | BINARY, 0x80 | 127]) + struct.pack("!Q", size) + os.urandom(4)
    answer = await flood(stack, client.secret, header + bytes(size))
    assert answer.close_code == 1009, answer
    assert not answer.reset, answer
    closed = await closed_stream(stack, client.key.id)
    assert closed["code"] == 1009 and closed["discarded_bytes"] > 0, closed


async def test_a_client_within_its_burst_is_served(stack: Stack, auth: auth_pb2_grpc.AuthServiceStub) -> None:
    """The bucket's burst of pings (and a JSON ping) in one write is answered in full, the stream open."""
    _, client = await new_key(auth, scopes=["account:read"])
    reader, writer = await upgraded(stack, client.secret)
    writer.write(frame(PING) * (BURST - 1) + frame(TEXT, json.dumps({"type": "ping"}).encode()))
    pongs, texts = 0, list[dict[str, Any]]()
    while not texts:
        first, second = await asyncio.wait_for(reader.readexactly(2), 30)
        payload = await reader.readexactly(second & 0x7F)
        if first & 0x0F == PONG:
            pongs += 1
        elif first & 0x0F == TEXT and json.loads(payload)["type"] != "ping":
            texts.append(json.loads(payload))
        assert first & 0x0F != CLOSE, payload
    assert texts == [{"type": "pong"}] and pongs == BURST - 1, (texts, pongs)
    writer.close()
