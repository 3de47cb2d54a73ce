"""Refusal pacing (svckit.pacing): which answers count, the pace rule by table, and the pacer's buckets and
held places on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from svckit.pacing import (
    BURST,
    GLOBAL_SHARE,
    HELD_MOST,
    LONGEST_HOLD,
    RATE,
    Pace,
    Pacing,
    RefusalPacer,
    hold_seconds,
    pace,
    paced,
)


@pytest.mark.parametrize(
    ("status", "accepted", "counts"),
    [
        (429, True, True),  # an accepted caller past its limit
        (429, False, True),
        (401, False, True),  # an unknown or made-up key
        (403, False, True),  # a forged form, no session
        (404, False, True),  # a path probed with no credential
        (400, False, True),
        (403, True, False),  # an accepted caller's own business: its rate limit holds their number
        (404, True, False),
        (400, True, False),
        (409, True, False),
        (200, False, False),  # answers are never paced
        (303, False, False),
        (500, False, False),  # our fault, never the client's
        (503, False, False),
        (503, True, False),
    ],
)
def test_paced(status: int, accepted: bool, counts: bool) -> None:
    assert paced(status, accepted) is counts


@pytest.mark.parametrize(
    ("allowed", "held_total", "expected"),
    [
        (True, 0, Pace.NOW),
        (True, HELD_MOST, Pace.NOW),  # within the allowance nothing else matters
        (False, 0, Pace.LATER),
        (False, HELD_MOST - 1, Pace.LATER),
        (False, HELD_MOST, Pace.CLOSE),  # as many held as memory allows: at once, the connection closed
    ],
)
def test_pace(allowed: bool, held_total: int, expected: Pace) -> None:
    assert pace(allowed, held_total) is expected


@pytest.mark.parametrize(
    ("held_by_source", "delay", "burst", "seconds"),
    [
        (1, 1.0, 40, 1.0),  # the delay
        (40, 1.0, 40, 1.0),
        (41, 1.0, 40, 2.0),  # past a burst held: two delays, so they come back 40 a second
        (200, 1.0, 40, 5.0),
        (1000, 1.0, 40, LONGEST_HOLD),  # never longer than the longest hold
        (5, 3.0, 40, 3.0),
        (5, 1.0, 0, 5.0),  # a burst of 0 counts as 1
        (0, 1.0, 40, 1.0),
    ],
)
def test_hold_seconds(held_by_source: int, delay: float, burst: int, seconds: float) -> None:
    assert hold_seconds(held_by_source, delay, burst) == seconds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def verdicts(pacer: RefusalPacer, address: str, n: int) -> list[Pace]:
    return [pacer.verdict(address) for _ in range(n)]


def test_a_source_is_answered_at_once_for_its_burst_then_held() -> None:
    clock = Clock()
    pacer = RefusalPacer(clock=clock)
    assert verdicts(pacer, "198.51.100.7", BURST) == [Pace.NOW] * BURST
    assert pacer.verdict("198.51.100.7") is Pace.LATER
    assert (pacer.held, pacer.held_total) == ({"198.51.100.7": 1}, 1)
    # Another address has its own allowance; the held refusal took nothing from the buckets.
    assert pacer.verdict("198.51.100.8") is Pace.NOW
    clock.now += 1 / RATE  # one refusal's worth refilled
    assert verdicts(pacer, "198.51.100.7", 2) == [Pace.NOW, Pace.LATER]


def test_an_ipv6_subscriber_is_one_source_by_its_64() -> None:
    pacer = RefusalPacer(clock=Clock())
    got = [pacer.verdict(f"2001:db8:0:1::{i:x}") for i in range(BURST + 1)]
    assert got == [Pace.NOW] * BURST + [Pace.LATER]
    assert pacer.verdict("2001:db8:0:2::1") is Pace.NOW


def test_many_addresses_are_held_to_everyones_allowance() -> None:
    pacer = RefusalPacer(clock=Clock())
    everyone = round(BURST * GLOBAL_SHARE)
    got = [pacer.verdict(f"10.{i // 250}.{i % 250}.1") for i in range(everyone + 3)]
    assert got == [Pace.NOW] * everyone + [Pace.LATER] * 3


def test_past_the_held_places_a_refusal_is_answered_at_once_and_its_connection_closed() -> None:
    pacer = RefusalPacer(Pacing(held=5), clock=Clock())
    verdicts(pacer, "198.51.100.7", BURST)
    assert verdicts(pacer, "198.51.100.7", 3) == [Pace.LATER] * 3
    assert verdicts(pacer, "198.51.100.8", BURST + 2) == [Pace.NOW] * BURST + [Pace.LATER] * 2
    assert verdicts(pacer, "198.51.100.9", BURST + 1) == [Pace.NOW] * BURST + [Pace.CLOSE]
    assert pacer.held == {"198.51.100.7": 3, "198.51.100.8": 2}  # a CLOSE holds no place


def test_a_zero_delay_or_rate_paces_nothing() -> None:
    for pacer in (RefusalPacer(Pacing(delay=0), clock=Clock()), RefusalPacer(Pacing(rate=0), clock=Clock())):
        assert verdicts(pacer, "198.51.100.7", 3 * BURST) == [Pace.NOW] * (3 * BURST)
        assert pacer.held_total == 0


async def test_a_source_with_many_held_waits_longer() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    pacer = RefusalPacer(Pacing(delay=1.0, burst=2), clock=Clock(), spread=lambda: 1.0)
    verdicts(pacer, "198.51.100.7", 2)
    assert verdicts(pacer, "198.51.100.7", 4) == [Pace.LATER] * 4
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asyncio, "sleep", sleep)
        await asyncio.gather(*(pacer.hold("198.51.100.7") for _ in range(4)))
    assert waits == [2.0, 2.0, 1.0, 1.0]  # 4 and 3 held: two delays; 2 and 1: one
    assert pacer.held_total == 0


async def test_hold_waits_the_spread_delay_and_frees_its_place_even_when_cancelled() -> None:
    pacer = RefusalPacer(Pacing(delay=0.05, burst=1), clock=Clock(), spread=lambda: 0.5)
    assert pacer.verdict("198.51.100.7") is Pace.NOW
    assert pacer.verdict("198.51.100.7") is Pace.LATER
    loop = asyncio.get_running_loop()
    started = loop.time()
    await pacer.hold("198.51.100.7")
    assert loop.time() - started >= 0.025
    assert (pacer.held, pacer.held_total) == ({}, 0)
    assert pacer.verdict("198.51.100.7") is Pace.LATER
    task = asyncio.ensure_future(pacer.hold("198.51.100.7"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (pacer.held, pacer.held_total) == ({}, 0)


def test_the_tracked_sources_are_bounded() -> None:
    clock = Clock()
    pacer = RefusalPacer(clock=clock, max_tracked=10)
    for i in range(10):
        pacer.verdict(f"10.0.{i}.1")
    assert len(pacer.tats) == 10
    pacer.verdict("10.0.0.1")  # used again: 10.0.1.1 is now the least recently used
    pacer.verdict("10.0.10.1")  # all ten still refilling: one makes room, not all (never grown)
    assert len(pacer.tats) == 10
    assert "10.0.1.1" not in pacer.tats and "10.0.0.1" in pacer.tats and "10.0.10.1" in pacer.tats
    clock.now += 60  # every bucket full again: forgotten, the same as never seen
    pacer.verdict("10.9.9.9")
    assert list(pacer.tats) == ["10.9.9.9"]
