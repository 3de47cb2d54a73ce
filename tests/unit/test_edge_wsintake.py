"""edge.wsintake: the linger's decision by table, and the intake's work counted per event-loop turn with
the real sans-IO parser of websockets (the socket and Sanic's WebSocket stood in for)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import pytest
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

from edge import wsintake
from edge.wsintake import (
    CLOSE_REASON_BYTES,
    LINGER_SECONDS,
    QUIET_SECONDS,
    SLICE_BYTES,
    TURN_BYTES,
    FrameIntake,
    close_reason,
    linger_wait,
)


@pytest.mark.parametrize(
    ("elapsed", "quiet_for", "ended", "wait"),
    [
        (0.0, 0.0, False, QUIET_SECONDS),  # just closed: wait for the client to be quiet
        (0.5, 0.04, False, QUIET_SECONDS - 0.04),  # still sending: ask again once it could be quiet
        (0.5, QUIET_SECONDS, False, None),  # quiet: nothing left to reset our close with
        (0.0, 0.0, True, None),  # EOF or the connection gone
        (LINGER_SECONDS, 0.0, False, None),  # sending all along: time's up (then closed anyway)
        (LINGER_SECONDS - 0.01, 0.0, False, pytest.approx(0.01)),  # the linger's end comes first
    ],
)
def test_linger_wait(elapsed: float, quiet_for: float, ended: bool, wait: float | None) -> None:
    assert linger_wait(elapsed, quiet_for, ended) == wait


@pytest.mark.parametrize(
    ("reason", "kept"),
    [
        ("", ""),
        ("invalid_request: short", "invalid_request: short"),
        ("a" * 123, "a" * 123),  # exactly what a close frame holds
        ("a" * 200, "a" * 123),
        ("é" * 100, "é" * 61),  # 2 bytes each: 61 fit (122 bytes); a 62nd would be split, so it goes
        ("a" + "€" * 60, "a" + "€" * 40),  # 3 bytes each: 1 + 120 bytes
        ("a" * 120 + "😀", "a" * 120),  # a 4-byte character that does not fit whole
    ],
)
def test_close_reason_fits_a_close_frame(reason: str, kept: str) -> None:
    """A stream's close reason is cut to 123 bytes of UTF-8, never mid-character: 120 characters (the
    cut the stream used before) of a non-ASCII reason made ws.close raise, and no close frame went out."""
    assert close_reason(reason) == kept
    assert len(close_reason(reason).encode()) <= CLOSE_REASON_BYTES


def ping() -> bytes:
    return bytes([0x80 | Opcode.PING.value, 0x80]) + os.urandom(4)  # masked, empty


class Transport:
    def __init__(self) -> None:
        self.paused = False
        self.written: list[bytes] = []
        self.aborted = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def abort(self) -> None:
        self.aborted = True


class Socketless:
    """Sanic's WebsocketImplProtocol as the intake sees it."""

    def __init__(self) -> None:
        self.ws_proto = ServerProtocol(state=State.OPEN)
        self.pause_frame_fut = None
        self.can_pause = True
        self.handed: list[Frame] = []

        self.eof = False

    async def async_data_received(self, data_to_send: list[bytes], events: list[Frame]) -> None:
        self.handed.extend(events)

    def eof_received(self) -> bool | None:
        self.ws_proto.receive_eof()  # raises if bytes came after it
        self.eof = True
        return False


class Owner:
    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.intake: FrameIntake | None = None

    def admit(self, frames: Sequence[Frame], now: float) -> int:
        for i in range(len(frames)):
            if self.tokens == 0:
                assert self.intake is not None
                self.intake.fault(1008, "rate_limited")
                return i
            self.tokens -= 1
        return len(frames)

    def parser_failed(self, code: int, reason: str) -> None:
        raise AssertionError("no frame here is malformed")


def intake_for(tokens: int) -> tuple[FrameIntake, Transport, Owner, Any]:
    ws, transport = Socketless(), Transport()
    intake = FrameIntake(ws, transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    owner = Owner(tokens)
    owner.intake = intake
    return intake, transport, owner, ws


async def turn() -> None:
    await asyncio.sleep(0)


async def test_one_read_is_parsed_a_turn_budget_at_a_time() -> None:
    intake, transport, owner, _ = intake_for(tokens=10**6)
    intake.serve(owner)
    pings = 64 * 1024 // 6
    intake.data_received(ping() * pings)
    assert 0 < intake.frames <= TURN_BYTES // 6 and transport.paused  # the rest waits, the socket not read
    for _ in range(100):
        await turn()
    assert intake.frames == pings and not transport.paused


async def test_nothing_is_parsed_before_the_session_serves_it() -> None:
    intake, transport, owner, _ = intake_for(tokens=10**6)
    intake.data_received(ping() * 100)
    await turn()
    assert intake.frames == 0 and transport.paused
    intake.serve(owner)
    await turn()
    assert intake.frames == 100 and not transport.paused


async def test_an_eof_reaches_the_parser_after_the_bytes_before_it() -> None:
    intake, _, owner, ws = intake_for(tokens=10**6)
    pings = 64 * 1024 // 6
    intake.data_received(ping() * pings)  # held: the session has not started
    assert intake.eof_received() is True  # the transport stays open meanwhile
    intake.serve(owner)
    for _ in range(100):
        await turn()
    assert intake.frames == pings and ws.eof


async def test_after_a_refusal_nothing_more_is_parsed() -> None:
    intake, transport, owner, ws = intake_for(tokens=20)
    intake.serve(owner)
    sent = ping() * 10_000
    intake.data_received(sent)
    for _ in range(10):
        intake.data_received(ping() * 1000)
        await turn()
    parsed = intake.frames
    assert 20 < parsed <= 20 + SLICE_BYTES // 6, parsed  # the burst, and the rest of the slice that refused
    assert len([f for f in ws.handed if f.opcode is Opcode.PING]) == 20  # only the admitted go on
    assert intake.discarding and intake.discarded == len(sent) + 10 * 6 * 1000 - SLICE_BYTES  # one slice fed
    assert transport.written[0][:1] == b"\x88"  # the close frame, written at once
    assert ws.can_pause is False and not transport.paused  # the linger reads all that comes


async def test_a_linger_ends_at_eof(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wsintake, "QUIET_SECONDS", 3600.0)  # only the EOF can end it here
    monkeypatch.setattr(wsintake, "LINGER_SECONDS", 3600.0)
    intake, _, owner, _ = intake_for(tokens=0)
    intake.serve(owner)
    intake.data_received(ping())
    assert intake.discarding
    lingering = asyncio.ensure_future(intake.linger())
    await turn()
    assert not lingering.done()
    assert intake.eof_received() is False  # and the connection closes
    await asyncio.wait_for(lingering, 30)


async def test_a_close_reason_is_cut_to_what_a_close_frame_holds() -> None:
    intake, transport, _, _ = intake_for(tokens=0)
    intake.fault(1008, "é" * 120)  # 240 bytes of UTF-8: a close frame holds 123 after the code
    close = transport.written[0]
    assert close[0] == 0x88 and close[1] == 2 + 122, close[:2]  # 61 whole characters
    assert close[2:4] == (1008).to_bytes(2, "big") and close[4:].decode() == "é" * 61
