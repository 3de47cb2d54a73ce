"""StreamEvents fan-out: one tailer per webhookd process reads new events once (seq after the last it saw,
every account) and hands them to the open streams in memory, each filtered by account, environment and
types. N open streams cost one query per batch of new events, not N per event.

A stream that resumes (``since_event_id``) or falls behind catches up from the database in bounded
batches (``seq`` after its position, plus the tailer's open and lately filled gaps below it), then takes
the live events queued meanwhile; a stream never gets one seq twice (``repeat``). Seqs commit out of
order on PostgreSQL: the tailer tracks the seqs it jumped over and re-reads them (webhookd._stream_gaps),
so a late event is delivered when it appears, after higher ones. A stream's queue is bounded
(``QUEUE_SIZE``): one that overflows drops its queue and catches up from the database again, so a slow
reader costs neither memory nor the others' speed.

The tailer wakes on ``notify`` (an event stored by this process) and polls every ``POLL_SECONDS`` for
events other processes stored. It runs while streams are open and stops once none has been for
``IDLE_POLLS`` polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from webhookd._repository import EventRecord
from webhookd._stream_gaps import GAP_SECONDS, LATE_SECONDS, Gaps, repeat

log = logging.getLogger(__name__)

BATCH = 200  # events per database read (tailer and catch-up alike)
POLL_SECONDS = 1.0
QUEUE_SIZE = 256  # live events a stream may hold unread before it falls back to the database
IDLE_POLLS = 30


class EventSource(Protocol):
    async def max_event_seq(self) -> int: ...

    async def events_since(
        self, after_seq: int, limit: int, also: Sequence[int] = ()
    ) -> list[EventRecord]: ...

    async def events_after(
        self,
        account_id: str,
        environment: str,
        after_seq: int,
        types: Sequence[str],
        limit: int,
        also: Sequence[int] = (),
    ) -> list[EventRecord]: ...


# -- the pure parts (tests/unit/test_webhook_stream_hub.py) ---------------------------------------
@dataclass(frozen=True, slots=True)
class StreamFilter:
    account_id: str
    environment: str
    types: frozenset[str]

    @property
    def kinds(self) -> list[str]:
        return sorted(self.types)

    def matches(self, event: EventRecord) -> bool:
        return (
            event.account_id == self.account_id
            and event.environment == self.environment
            and event.type in self.types
        )


class Offer(enum.Enum):
    IGNORE = "ignore"  # not this stream's, already sent, or the stream is catching up from the database
    QUEUE = "queue"
    OVERFLOW = "overflow"  # the queue is full: drop it, catch up from the database


def offer(wanted: bool, behind: bool, had: bool, queued: int, limit: int) -> Offer:
    """What a stream does with a live event (``had``: it was handed out already, ``repeat``), with
    ``queued`` events already waiting."""
    if not wanted or behind or had:
        return Offer.IGNORE
    if queued >= limit:
        return Offer.OVERFLOW
    return Offer.QUEUE


def caught_up(batch_len: int, batch_size: int) -> bool:
    """A catch-up read shorter than a full batch reached the end of what was stored when it ran."""
    return batch_len < batch_size


# -- the hub -------------------------------------------------------------------------------------
@dataclass(eq=False)
class Subscriber:
    flt: StreamFilter
    last_seq: int  # the highest seq handed out (or the stream's starting point)
    behind: bool
    gaps: Gaps  # the tailer's
    limit: int = QUEUE_SIZE
    queue: deque[EventRecord] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    overflows: int = 0
    sent: set[int] = field(default_factory=set)  # handed out above the tailer's floor or among its late

    def had(self, seq: int) -> bool:
        return repeat(seq, self.last_seq, self.gaps.floor, self.gaps.late, self.sent)

    def take(self, event: EventRecord) -> bool:
        """Hand ``event`` out (True) unless this stream had it."""
        if self.had(event.seq):
            return False
        if event.seq > self.gaps.floor or event.seq in self.gaps.late:
            self.sent.add(event.seq)
        self.last_seq = max(self.last_seq, event.seq)
        return True

    def prune(self) -> None:
        """Forget what ``repeat`` now answers from the floor alone."""
        floor, late = self.gaps.floor, self.gaps.late
        self.sent = {s for s in self.sent if s > floor or s in late}

    def offer(self, event: EventRecord) -> None:
        wanted = self.flt.matches(event)
        verdict = offer(wanted, self.behind, wanted and self.had(event.seq), len(self.queue), self.limit)
        if verdict is Offer.QUEUE:
            self.queue.append(event)
            self.ready.set()
        elif verdict is Offer.OVERFLOW:
            self.queue.clear()
            self.behind = True
            self.overflows += 1
            self.ready.set()


class EventHub:
    """The process's one event tailer and its subscribers. ``notify`` when this process stores an event."""

    def __init__(
        self,
        *,
        poll_seconds: float = POLL_SECONDS,
        batch: int = BATCH,
        queue_size: int = QUEUE_SIZE,
        idle_polls: int = IDLE_POLLS,
        gap_seconds: float = GAP_SECONDS,
        late_seconds: float = LATE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.queue_size = queue_size
        self.idle_polls = idle_polls
        self.clock = clock
        self._subs: set[Subscriber] = set()
        self._wake = asyncio.Event()
        self.gaps = Gaps(0, gap_seconds=gap_seconds, late_seconds=late_seconds)
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Lock | None = None
        self._closed = False

    def notify(self) -> None:
        self._wake.set()

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    async def _ensure_tailer(self, repo: EventSource) -> None:
        if self._task is not None and not self._task.done():
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._task is None or self._task.done():
                # Seqs below the head still in flight now are not waited for (they are not known).
                self.gaps.skip_to(await repo.max_event_seq(), self.clock())
                self._task = asyncio.create_task(self._tail(repo), name="stream-tailer")

    async def _tail(self, repo: EventSource) -> None:
        idle = 0
        while True:
            self._wake.clear()
            try:
                if self._subs:
                    idle = 0
                    batch = await repo.events_since(self.gaps.head, self.batch, self.gaps.pending())
                    by_seq = {e.seq: e for e in batch}
                    for seq in self.gaps.advance([e.seq for e in batch], self.clock()):
                        for sub in list(self._subs):
                            sub.offer(by_seq[seq])
                    for sub in self._subs:
                        sub.prune()
                    if len(batch) == self.batch:
                        await asyncio.sleep(0)  # let the streams send before the next batch
                        continue
                else:
                    idle += 1
                    if idle > self.idle_polls:
                        self._task = None  # no await from here on: a new stream starts a new tailer
                        return
                    head = await repo.max_event_seq()
                    if not self._subs:  # one that joined meanwhile starts at the old head: read from it
                        self.gaps.skip_to(head, self.clock())
            except asyncio.CancelledError:
                raise
            except Exception:
                # A database outage: the streams keep waiting; the next poll tries again.
                log.warning("stream tailer could not read events", exc_info=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_seconds):
                    await self._wake.wait()

    async def events(
        self, repo: EventSource, flt: StreamFilter, since_seq: int | None
    ) -> AsyncGenerator[EventRecord, None]:
        """The stream's events, each once: after ``since_seq`` (caught up from the database first, with
        the late events below it), or from now on (None); in the order they became visible."""
        await self._ensure_tailer(repo)
        # No await between reading the head and joining: every event after it is offered to this stream.
        start = self.gaps.head if since_seq is None else since_seq
        sub = Subscriber(flt, start, behind=since_seq is not None, gaps=self.gaps, limit=self.queue_size)
        self._subs.add(sub)
        try:
            while True:
                if sub.behind:
                    # Live events offered from here on are queued (the queue starts empty); the read
                    # below returns at least every event the tailer has handed out so far.
                    sub.behind = False
                    sub.queue.clear()
                    also = [s for s in self.gaps.unsettled(sub.last_seq) if s not in sub.sent]
                    batch = await repo.events_after(
                        flt.account_id, flt.environment, sub.last_seq, flt.kinds, self.batch, also
                    )
                    for event in batch:
                        if sub.take(event):
                            yield event
                    if not caught_up(len(batch), self.batch):
                        sub.behind = True
                    continue
                while sub.queue and not sub.behind:
                    event = sub.queue.popleft()
                    if sub.take(event):
                        yield event
                if not sub.queue and not sub.behind:
                    sub.ready.clear()
                    await sub.ready.wait()
                if self._closed:  # the process stops: the stream ends, its reader resumes elsewhere
                    return
        finally:
            self._subs.discard(sub)

    async def close(self) -> None:
        """Stop the tailer and end every stream (each after what it already has queued)."""
        self._closed = True
        for sub in self._subs:
            sub.ready.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
