"""The stream tailer's gap tracking, pure (tests/unit/test_webhook_stream_gaps.py).

An event's ``seq`` is taken before its transaction commits, so on PostgreSQL with several writers seq 10
can become visible after seq 11. The tailer reads ``seq > head`` and notes every seq it jumped over as an
open gap; each poll re-reads the open gaps as well, until the event appears (it is then delivered, late)
or the gap is ``GAP_SECONDS`` old (a rolled-back transaction leaves a seq that never appears). Events above
a gap are delivered at once, so a stream's order is the order events became visible, not strictly seq.

``floor`` is the last seq below which no gap is open. A gap that was filled is remembered for
``LATE_SECONDS`` so a stream that resumes (``since_event_id``) or catches up again gets the late events
below its position too.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

GAP_SECONDS = 5.0  # how long a missing seq is waited for; after it the event is never streamed live
LATE_SECONDS = 60.0  # how long a late (gap-filling) event is re-offered to resuming streams
MAX_GAPS = 1000  # open gaps tracked at most (a bigger jump is a sequence skip, not writers in flight)


@dataclass(slots=True)
class Gaps:
    head: int  # the highest seq read
    gap_seconds: float = GAP_SECONDS
    late_seconds: float = LATE_SECONDS
    open: dict[int, float] = field(default_factory=dict)  # seq -> when it stops being waited for
    late: dict[int, float] = field(default_factory=dict)  # filled gap -> when it is forgotten

    @property
    def floor(self) -> int:
        return min(self.open) - 1 if self.open else self.head

    def pending(self) -> list[int]:
        """The open gaps, to read again with the next ``seq > head``."""
        return sorted(self.open)

    def unsettled(self, upto: int) -> list[int]:
        """Seqs at or below ``upto`` that may still (open) or did lately (late) turn up: what a stream
        catching up from the database at position ``upto`` reads besides ``seq > upto``."""
        return sorted(s for s in (*self.open, *self.late) if s <= upto)

    def advance(self, seqs: Iterable[int], now: float) -> list[int]:
        """Take a read's seqs (ascending); answer those new to the tailer (to hand out), in read order."""
        fresh: list[int] = []
        for seq in seqs:
            if seq in self.open:
                del self.open[seq]
                self.late[seq] = now + self.late_seconds
                fresh.append(seq)
            elif seq > self.head:
                for missing in range(max(self.head + 1, seq - MAX_GAPS), seq):
                    self.open[missing] = now + self.gap_seconds
                self.head = seq
                fresh.append(seq)
        self.expire(now)
        return fresh

    def skip_to(self, head: int, now: float) -> None:
        """Follow the head without reading (no stream open): nothing above the old head is waited for."""
        self.head = max(self.head, head)
        self.expire(now)

    def expire(self, now: float) -> None:
        for table in (self.open, self.late):
            for seq in [s for s, until in table.items() if until <= now]:
                del table[seq]
        while len(self.open) > MAX_GAPS:
            del self.open[min(self.open)]


def repeat(seq: int, last_seq: int, floor: int, late: Container[int], sent: set[int]) -> bool:
    """Has a stream at ``last_seq`` (its highest seq handed out), with ``sent`` (what it was handed above
    the tailer's ``floor`` or among the ``late`` ones), had ``seq`` already? At or below the floor and not
    late, a seq at or below the stream's position is settled: handed out or before the stream's start."""
    if seq in sent:
        return True
    return seq <= last_seq and seq <= floor and seq not in late
