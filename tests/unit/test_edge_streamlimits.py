"""/v1/stream's limits as pure rules (edge.streamlimits), by table."""

from __future__ import annotations

import pytest

from edge.streamlimits import ACCOUNT, KEY, MessageBucket, StreamSlots, admission, refusal_message, take_token


@pytest.mark.parametrize(
    ("open_key", "open_account", "max_key", "max_account", "refused"),
    [
        (0, 0, 10, 100, None),
        (9, 99, 10, 100, None),
        (10, 10, 10, 100, KEY),  # the key's limit
        (11, 11, 10, 100, KEY),
        (3, 100, 10, 100, ACCOUNT),  # the account's, with the key under its own
        (10, 100, 10, 100, KEY),  # both: the key's is named
        (10_000, 10_000, 0, 0, None),  # 0: no limit
        (10_000, 10_000, 0, 100, ACCOUNT),
        (10_000, 5, 10, 0, KEY),
        (0, 0, 1, 1, None),
        (1, 0, 1, 1, KEY),
    ],
)
def test_admission(
    open_key: int, open_account: int, max_key: int, max_account: int, refused: str | None
) -> None:
    assert admission(open_key, open_account, max_key, max_account) == refused


def test_refusal_messages_name_the_limit() -> None:
    assert "this API key already has 10 open streams" in refusal_message(KEY, 10)
    assert "this account already has 100 open streams" in refusal_message(ACCOUNT, 100)


def test_slots_count_by_key_and_account_and_free_on_release() -> None:
    slots = StreamSlots()
    assert [slots.acquire("k1", "a", 2, 3) for _ in range(3)] == [None, None, KEY]
    assert slots.acquire("k2", "a", 2, 3) is None
    assert slots.acquire("k3", "a", 2, 3) == ACCOUNT  # nothing taken by a refusal
    assert slots.acquire("k4", "b", 2, 3) is None  # another account
    assert slots.by_key == {"k1": 2, "k2": 1, "k4": 1} and slots.by_account == {"a": 3, "b": 1}
    slots.release("k1", "a")
    assert slots.acquire("k3", "a", 2, 3) is None
    for key, account in (("k1", "a"), ("k2", "a"), ("k3", "a"), ("k4", "b")):
        slots.release(key, account)
    assert slots.by_key == {} and slots.by_account == {}  # nothing left behind per key ever seen
    slots.release("k9", "z")  # a release never goes negative
    assert slots.by_key == {} and slots.by_account == {}


@pytest.mark.parametrize(
    ("tokens", "elapsed", "rate", "burst", "allowed", "left"),
    [
        (20.0, 0.0, 5.0, 20, True, 19.0),
        (1.0, 0.0, 5.0, 20, True, 0.0),
        (0.0, 0.0, 5.0, 20, False, 0.0),  # empty: refused
        (0.5, 0.0, 5.0, 20, False, 0.5),
        (0.0, 0.2, 5.0, 20, True, 0.0),  # a fifth of a second refills one at 5/s
        (0.0, 0.1, 5.0, 20, False, 0.5),
        (0.0, 3600.0, 5.0, 20, True, 19.0),  # refilled up to the burst, never more
        (0.0, -5.0, 5.0, 20, False, 0.0),  # a clock going back refills nothing
        (0.0, 0.0, 0.0, 20, True, 0.0),  # rate 0: no limit
    ],
)
def test_take_token(
    tokens: float, elapsed: float, rate: float, burst: int, allowed: bool, left: float
) -> None:
    got_allowed, got_left = take_token(tokens, elapsed, rate, burst)
    assert got_allowed is allowed
    assert got_left == pytest.approx(left)


def test_a_flood_gets_the_burst_then_the_rate() -> None:
    bucket = MessageBucket(rate=5.0, burst=20)
    assert sum(bucket.take(100.0) for _ in range(1000)) == 20  # all at once: the burst only
    assert sum(bucket.take(101.0) for _ in range(1000)) == 5  # a second later: a second's worth
    steady = MessageBucket(rate=5.0, burst=20)
    assert all(steady.take(t / 5) for t in range(1000))  # 5 a second forever: never refused


def test_opens_per_account_are_a_token_bucket() -> None:
    from edge.streamlimits import OPENS, StreamSlots, refusal_message

    slots = StreamSlots()
    assert [slots.may_open("acct_1", 100.0, 2.0, 3) for _ in range(4)] == [True, True, True, False]
    assert slots.may_open("acct_2", 100.0, 2.0, 3)  # another account has its own bucket
    assert not slots.may_open("acct_1", 100.4, 2.0, 3)  # 0.8 of a token
    assert slots.may_open("acct_1", 100.6, 2.0, 3)  # refilled at 2 a second
    assert all(slots.may_open("acct_3", 100.0, 0.0, 1) for _ in range(50))  # rate 0: no limit
    assert "faster than 2 a second" in refusal_message(OPENS, 2)


def test_open_buckets_are_bounded() -> None:
    from edge import streamlimits
    from edge.streamlimits import StreamSlots

    slots = StreamSlots()
    for n in range(streamlimits.MAX_OPEN_BUCKETS):
        slots.may_open(f"acct_{n}", 0.0, 10.0, 5)
    slots.may_open("acct_new", 10.0, 10.0, 5)  # the others have refilled by now: dropped
    assert list(slots.opens) == ["acct_new"]
