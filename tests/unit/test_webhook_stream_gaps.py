"""The stream tailer's gap tracking (webhookd._stream_gaps), by table: which seqs a read hands out, which
it leaves waited for and for how long, and which seq a stream already had."""

from __future__ import annotations

import pytest

from webhookd._stream_gaps import MAX_GAPS, Gaps, repeat

GAP, LATE = 5.0, 60.0


def gaps(head: int, open_: dict[int, float] | None = None, late: dict[int, float] | None = None) -> Gaps:
    return Gaps(head, GAP, LATE, dict(open_ or {}), dict(late or {}))


@pytest.mark.parametrize(
    ("before", "read", "now", "fresh", "head", "open_", "late"),
    [
        (gaps(10), [11, 12], 0.0, [11, 12], 12, {}, {}),  # in order: no gap
        (gaps(10), [], 0.0, [], 10, {}, {}),
        (gaps(10), [12], 0.0, [12], 12, {11: 5.0}, {}),  # 11 committed after 12 (or rolled back)
        (gaps(10), [13, 15], 1.0, [13, 15], 15, {11: 6.0, 12: 6.0, 14: 6.0}, {}),
        (gaps(12, {11: 5.0}), [11, 13], 2.0, [11, 13], 13, {}, {11: 62.0}),  # late: handed out once
        (gaps(12, {11: 5.0}), [13], 2.0, [13], 13, {11: 5.0}, {}),  # still waited for
        (gaps(12, {11: 5.0}), [13], 5.0, [13], 13, {}, {}),  # too old: given up (a rollback)
        (gaps(12, {}, {11: 62.0}), [11, 12], 3.0, [], 12, {}, {11: 62.0}),  # had both: nothing new
        (gaps(12, {}, {11: 62.0}), [], 62.0, [], 12, {}, {}),  # the late one forgotten
        (gaps(0), [5 + MAX_GAPS * 2], 0.0, [5 + MAX_GAPS * 2], 5 + MAX_GAPS * 2, None, {}),  # a skip
    ],
)
def test_advance(
    before: Gaps,
    read: list[int],
    now: float,
    fresh: list[int],
    head: int,
    open_: dict[int, float] | None,
    late: dict[int, float],
) -> None:
    assert before.advance(read, now) == fresh
    assert before.head == head
    if open_ is None:  # a jump: only the nearest MAX_GAPS seqs below it are waited for
        assert sorted(before.open) == list(range(head - MAX_GAPS, head))
    else:
        assert before.open == open_
    assert before.late == late


@pytest.mark.parametrize(
    ("state", "floor", "pending", "unsettled_12"),
    [
        (gaps(12), 12, [], []),
        (gaps(15, {11: 5.0, 14: 5.0}), 10, [11, 14], [11]),
        (gaps(15, {14: 5.0}, {9: 60.0, 13: 60.0}), 13, [14], [9]),  # 13 is above 12
    ],
)
def test_floor_pending_unsettled(
    state: Gaps, floor: int, pending: list[int], unsettled_12: list[int]
) -> None:
    assert state.floor == floor  # no open gap at or below it
    assert state.pending() == pending
    assert state.unsettled(12) == unsettled_12


def test_skip_to_never_moves_back_and_expires() -> None:
    state = gaps(12, {11: 5.0})
    state.skip_to(20, 1.0)
    assert (state.head, state.open) == (20, {11: 5.0})  # nothing above 12 is waited for
    state.skip_to(15, 5.0)
    assert (state.head, state.open, state.floor) == (20, {}, 20)


@pytest.mark.parametrize(
    ("seq", "last_seq", "floor", "late", "sent", "had"),
    [
        (13, 12, 12, set(), set(), False),  # after the stream's position: new
        (12, 12, 12, set(), set(), True),  # settled at or below both
        (11, 12, 10, set(), set(), False),  # an open gap below the stream's position: new when it comes
        (11, 12, 10, set(), {11}, True),  # ... but only once
        (9, 12, 12, {9}, set(), False),  # late, not yet handed to this stream (a resume)
        (9, 12, 12, {9}, {9}, True),
        (13, 14, 12, set(), {13}, True),  # a catch-up read had it before the tailer did
        (13, 14, 12, set(), set(), False),
    ],
)
def test_repeat(seq: int, last_seq: int, floor: int, late: set[int], sent: set[int], had: bool) -> None:
    assert repeat(seq, last_seq, floor, late, sent) is had
