"""The stream fan-out's pure rules (webhookd._stream_hub), by table: which live event a stream queues,
when it falls back to the database, when a catch-up read has reached the end."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncGenerator, Sequence

import pytest

from webhookd._repository import EventRecord
from webhookd._stream_gaps import Gaps
from webhookd._stream_hub import EventHub, Offer, StreamFilter, Subscriber, caught_up, offer

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
FLT = StreamFilter("acct_1", "live", frozenset({"booking.confirmed", "payment.failed"}))


def event(
    seq: int, account: str = "acct_1", env: str = "live", kind: str = "booking.confirmed"
) -> EventRecord:
    return EventRecord(f"evt_{seq}", account, env, kind, "confirmed", NOW, b"{}", seq)


@pytest.mark.parametrize(
    ("ev", "wanted"),
    [
        (event(1), True),
        (event(1, kind="payment.failed"), True),
        (event(1, account="acct_2"), False),
        (event(1, env="sandbox"), False),
        (event(1, kind="apikey.revoked"), False),
    ],
)
def test_filter(ev: EventRecord, wanted: bool) -> None:
    assert FLT.matches(ev) is wanted


@pytest.mark.parametrize(
    ("wanted", "behind", "had", "queued", "limit", "expected"),
    [
        (True, False, False, 0, 4, Offer.QUEUE),
        (True, False, False, 3, 4, Offer.QUEUE),  # the last free place
        (True, False, False, 4, 4, Offer.OVERFLOW),  # full: fall back to the database
        (False, False, False, 4, 4, Offer.IGNORE),  # not this stream's: never an overflow
        (True, False, True, 0, 4, Offer.IGNORE),  # already sent (the catch-up read had it)
        (True, False, True, 4, 4, Offer.IGNORE),  # ... never an overflow either
        (True, True, False, 0, 4, Offer.IGNORE),  # catching up: the read will find it
    ],
)
def test_offer(wanted: bool, behind: bool, had: bool, queued: int, limit: int, expected: Offer) -> None:
    assert offer(wanted, behind, had, queued, limit) is expected


@pytest.mark.parametrize(("got", "size", "done"), [(0, 200, True), (199, 200, True), (200, 200, False)])
def test_caught_up(got: int, size: int, done: bool) -> None:
    assert caught_up(got, size) is done


def test_an_overflow_drops_the_queue_and_marks_the_stream_behind() -> None:
    sub = Subscriber(FLT, last_seq=0, behind=False, gaps=Gaps(0), limit=2)
    for seq in (1, 2):
        sub.offer(event(seq))
    assert [e.seq for e in sub.queue] == [1, 2] and not sub.behind
    sub.offer(event(3, account="acct_2"))  # someone else's: no effect
    assert len(sub.queue) == 2 and not sub.behind
    sub.offer(event(4))
    assert not sub.queue and sub.behind and sub.overflows == 1
    sub.offer(event(5))  # behind: nothing is held until it caught up
    assert not sub.queue


class Source:
    """Events in memory, stored under any seq (out of order, as concurrent PostgreSQL writers commit);
    ``max_event_seq`` can be held (``gate``) to interleave a subscriber with it."""

    def __init__(self) -> None:
        self.stored: dict[int, EventRecord] = {}
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = asyncio.Event()
        self.reads: list[tuple[int, list[int]]] = []  # the tailer's (after_seq, also)

    def store(self, *events: EventRecord) -> None:
        self.stored.update((e.seq, e) for e in events)

    async def max_event_seq(self) -> int:
        self.asked.set()
        await self.gate.wait()
        return max(self.stored, default=0)

    def _read(self, after_seq: int, also: Sequence[int]) -> list[EventRecord]:
        return [self.stored[s] for s in sorted(self.stored) if s > after_seq or s in also]

    async def events_since(self, after_seq: int, limit: int, also: Sequence[int] = ()) -> list[EventRecord]:
        self.reads.append((after_seq, list(also)))
        return self._read(after_seq, also)[:limit]

    async def events_after(
        self,
        account_id: str,
        environment: str,
        after_seq: int,
        types: Sequence[str],
        limit: int,
        also: Sequence[int] = (),
    ) -> list[EventRecord]:
        return [e for e in self._read(after_seq, also) if e.type in types][:limit]


async def test_a_stream_joining_while_the_idle_tailer_looks_up_the_head_misses_nothing() -> None:
    source, hub = Source(), EventHub(poll_seconds=0.01)
    flt = StreamFilter("acct_1", "live", frozenset({"booking.confirmed"}))
    first = hub.events(source, flt, None)
    got = asyncio.ensure_future(anext(first))
    while hub.subscribers == 0:  # noqa: ASYNC110 (nothing to wait on)
        await asyncio.sleep(0)
    source.store(event(1))
    hub.notify()
    assert (await asyncio.wait_for(got, 5)).seq == 1
    await first.aclose()  # no stream open: the tailer only follows the head now
    source.gate.clear()
    source.asked.clear()
    await source.asked.wait()  # ... and is waiting for it
    second = hub.events(source, flt, None)
    joined = asyncio.ensure_future(anext(second))
    while hub.subscribers == 0:  # noqa: ASYNC110 (nothing to wait on)
        await asyncio.sleep(0)
    source.store(event(2))  # published after the stream joined, before the head was read
    source.gate.set()
    assert (await asyncio.wait_for(joined, 5)).seq == 2
    await second.aclose()
    await hub.close()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def next_seq(stream: AsyncGenerator[EventRecord, None]) -> int:
    return (await asyncio.wait_for(anext(stream), 5)).seq


async def nothing_more(hub: EventHub, source: Source, stream: AsyncGenerator[EventRecord, None]) -> None:
    """Two more tailer reads hand the stream nothing (the next event it gets is a marker)."""
    for _ in range(2):
        reads = len(source.reads)
        hub.notify()
        while len(source.reads) == reads:  # noqa: ASYNC110 (nothing to wait on)
            await asyncio.sleep(0)


async def test_an_event_committed_after_a_higher_one_is_streamed_late_and_once() -> None:
    source, clock = Source(), Clock()
    source.store(event(1))
    hub = EventHub(poll_seconds=0.01, clock=clock)
    live = hub.events(source, FLT, None)
    got = asyncio.ensure_future(next_seq(live))
    while hub.subscribers == 0:  # noqa: ASYNC110 (nothing to wait on)
        await asyncio.sleep(0)
    source.store(event(3))  # 2 is still in flight
    hub.notify()
    assert await got == 3
    assert hub.gaps.pending() == [2]
    # A stream resuming after 3 while 2 is open gets it when it appears; one after 1 reads it as usual.
    after_3 = hub.events(source, FLT, 3)
    after_1 = hub.events(source, FLT, 1)
    source.store(event(2))
    hub.notify()
    assert await next_seq(live) == 2
    assert await next_seq(after_3) == 2
    assert [await next_seq(after_1), await next_seq(after_1)] == [2, 3]
    await nothing_more(hub, source, live)
    assert hub.gaps.pending() == [] and hub.gaps.late.keys() == {2}
    # A stream resuming after 3 once 2 appeared still gets it (it may have missed it), then goes on.
    late_resume = hub.events(source, FLT, 3)
    assert await next_seq(late_resume) == 2
    source.store(event(4))
    hub.notify()
    for stream in (live, after_3, after_1, late_resume):
        assert await next_seq(stream) == 4  # and never 2 or 3 again
        await stream.aclose()
    await hub.close()


async def test_a_gap_that_never_fills_expires_and_holds_nothing_back() -> None:
    source, clock = Source(), Clock()
    hub = EventHub(poll_seconds=0.01, gap_seconds=5.0, clock=clock)
    live = hub.events(source, FLT, None)
    got = asyncio.ensure_future(next_seq(live))
    while hub.subscribers == 0:  # noqa: ASYNC110 (nothing to wait on)
        await asyncio.sleep(0)
    source.store(event(2))  # 1 rolled back
    hub.notify()
    assert await got == 2  # at once, not after the gap
    assert hub.gaps.pending() == [1]
    await nothing_more(hub, source, live)
    assert source.reads[-1] == (2, [1])  # re-read on each poll
    clock.now = 5.0
    await nothing_more(hub, source, live)
    assert hub.gaps.pending() == [] and source.reads[-1] == (2, [])
    source.store(event(1), event(3))  # past the bound: 1 is never streamed live
    hub.notify()
    assert await next_seq(live) == 3
    await live.aclose()
    await hub.close()
