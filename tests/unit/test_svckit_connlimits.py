"""The connection limits' rules (svckit.connlimits), by table, and the guard's counts (svckit.connguard)."""

from __future__ import annotations

import pytest

from svckit.connguard import ConnectionGuard, Guarded
from svckit.connlimits import (
    HOLD,
    HOLD_BURST,
    LONGEST_HOLD,
    REFUSALS_HELD,
    TRUSTED_FACTOR,
    TRUSTED_SECONDS,
    ConnectionLimits,
    Limit,
    Open,
    admit,
    close_after,
    keep_alive,
    refusal_hold,
)
from svckit.requesttarget import bad_target, escape_target, head_too_large

LIMITS = ConnectionLimits(per_source=4, per_block=10, budget=100, anonymous_keep_alive=2.0)


@pytest.mark.parametrize(
    ("source", "block", "total", "trusted", "limit"),
    [
        (0, 0, 0, False, Limit.OPEN),
        (3, 9, 49, False, Limit.OPEN),  # just under every cap
        (4, 4, 10, False, Limit.SOURCE),  # its address holds its share
        (1, 10, 10, False, Limit.BLOCK),  # its /24 does
        (0, 0, 50, False, Limit.ANONYMOUS),  # half the budget: the anonymous lane is full
        (4, 10, 50, False, Limit.ANONYMOUS),  # the process's limit is named first
        (0, 0, 100, False, Limit.BUDGET),
        # A trusted source: not held to its block nor to the anonymous lane, its own cap 8x larger.
        (4, 10, 50, True, Limit.OPEN),
        (4 * TRUSTED_FACTOR - 1, 0, 99, True, Limit.OPEN),
        (4 * TRUSTED_FACTOR, 0, 60, True, Limit.SOURCE),
        (0, 0, 100, True, Limit.BUDGET),  # the budget binds everyone
    ],
)
def test_admit(source: int, block: int, total: int, trusted: bool, limit: Limit) -> None:
    assert admit(Open(source, block, total), trusted, LIMITS) is limit


def test_a_cap_of_zero_is_off() -> None:
    off = ConnectionLimits(per_source=0, per_block=0, budget=0)
    assert admit(Open(10**6, 10**6, 10**6), False, off) is Limit.OPEN


@pytest.mark.parametrize(
    ("accepted", "server", "limit", "expected"),
    [(False, 120.0, 2.0, 2.0), (True, 120.0, 2.0, 120.0), (False, 1.0, 2.0, 1.0), (False, 120.0, 0.0, 120.0)],
)
def test_keep_alive(accepted: bool, server: float, limit: float, expected: float) -> None:
    assert keep_alive(accepted, server, ConnectionLimits(anonymous_keep_alive=limit)) == expected


@pytest.mark.parametrize(
    ("status", "request_accepted", "connection_accepted", "closes"),
    [
        (401, False, False, True),  # a made-up key on an anonymous connection
        (404, False, False, True),
        (429, False, False, True),
        (200, False, False, False),  # an anonymous page (docs, sign-in form) keeps its connection
        (500, False, False, False),  # our fault, not the client's
        (403, True, False, False),  # an accepted key's refusal: its own business
        (401, False, True, False),  # a connection a key was accepted on keeps going
    ],
)
def test_close_after(status: int, request_accepted: bool, connection_accepted: bool, closes: bool) -> None:
    assert close_after(status, request_accepted, connection_accepted) is closes


class _Protocol:
    keep_alive_timeout = 120.0


def test_the_guard_counts_releases_and_trusts() -> None:
    now = [0.0]
    guard = ConnectionGuard(LIMITS, clock=lambda: now[0])
    held = [guard.admit("10.0.0.1", _Protocol()) for _ in range(4)]
    assert all(isinstance(g, Guarded) for g in held)
    assert guard.admit("10.0.0.1", _Protocol()) is Limit.SOURCE
    assert isinstance(guard.admit("10.0.0.2", _Protocol()), Guarded)  # another address of its /24
    first = held[0]
    assert isinstance(first, Guarded) and first.protocol.keep_alive_timeout == 2.0
    first.accept()  # a key accepted on it: the server's keep-alive, its address trusted
    assert first.protocol is not None and first.protocol.keep_alive_timeout == 120.0
    assert isinstance(guard.admit("10.0.0.1", _Protocol()), Guarded)
    first.release()
    first.release()  # once only
    assert guard.total == 5 and guard.by_source["10.0.0.1"] == 4
    now[0] = TRUSTED_SECONDS + 1  # trust lapses
    assert guard.admit("10.0.0.1", _Protocol()) is Limit.SOURCE


@pytest.mark.parametrize(
    ("buffer", "status"),
    [(b"GET /" + b"a" * 9000, 414), (b"GET /a HTTP/1.1\r\nX: " + b"a" * 9000, 431)],
)
def test_head_too_large_names_the_request_line_or_the_fields(buffer: bytes, status: int) -> None:
    assert head_too_large(buffer, 8192).status_code == status


def test_a_target_with_a_control_byte_is_refused_and_escaped() -> None:
    assert bad_target("/a?b=c%20") is None
    refusal = bad_target("/a\x01b")
    assert refusal is not None and refusal.status_code == 400
    assert escape_target("/a\x01b c") == "/a%01b%20c"


@pytest.mark.parametrize(
    ("held_by_block", "held_total", "seconds"),
    [
        (1, 0, HOLD),
        (HOLD_BURST, 10, HOLD),  # a block's first burst waits one hold
        (HOLD_BURST + 1, 10, 2 * HOLD),  # the next burst two: a block retries HOLD_BURST per HOLD
        (10**6, 10, LONGEST_HOLD),
        (1, REFUSALS_HELD, None),  # too many held: answered at once
    ],
)
def test_refusal_hold(held_by_block: int, held_total: int, seconds: float | None) -> None:
    assert refusal_hold(held_by_block, held_total) == seconds


def test_the_guard_frees_held_places() -> None:
    guard = ConnectionGuard(LIMITS, spread=lambda: 1.5)
    assert guard.hold("10.0.0.0/24") == 1.5 * HOLD and guard.held_total == 1
    guard.unhold("10.0.0.0/24")
    assert guard.held_total == 0 and not guard.held_by_block
