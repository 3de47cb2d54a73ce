"""Tables of the portal's sign-in limit (portal.signin_limit): GCRA per source address, per /24 or /48
block, and for every source together."""

from __future__ import annotations

import pytest

from portal.signin_limit import SourceLimiter, Tier, attempt
from svckit.gcra import take
from svckit.netblocks import block_key, source_key


@pytest.mark.parametrize(
    ("tat", "now", "allowed", "stored", "retry_after"),
    [
        (None, 100.0, True, 106.0, 0.0),  # first attempt: a full bucket
        (50.0, 100.0, True, 106.0, 0.0),  # a tat in the past is a full bucket
        (154.0, 100.0, True, 160.0, 0.0),  # the burst's last attempt (10 x 6 s ahead)
        (160.0, 100.0, False, 160.0, 6.0),  # burst used up: one period to wait
        (190.0, 100.0, False, 190.0, 36.0),
        (160.0, 106.0, True, 166.0, 0.0),  # a period later, one more
    ],
)
def test_take(tat: float | None, now: float, allowed: bool, stored: float, retry_after: float) -> None:
    got = take(tat, now, period=6.0, burst=10)
    assert (got.allowed, got.tat, got.retry_after) == (allowed, stored, retry_after)


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::ffff", "2001:db8:1:2::/64"),  # same subscriber block
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("", ""),
        ("not an address", "not an address"),
    ],
)
def test_source_key(address: str, key: str) -> None:
    assert source_key(address) == key


def test_limiter_counts_per_source_and_forgets_full_buckets() -> None:
    now = [0.0]
    limiter = SourceLimiter(period=6.0, burst=3, max_tracked=2, clock=lambda: now[0])
    assert [limiter.attempt("192.0.2.1") for _ in range(4)] == [0.0, 0.0, 0.0, 6.0]
    assert limiter.attempt("192.0.2.2") == 0.0  # another address has its own bucket
    now[0] = 100.0  # both buckets full again: forgotten when room is needed
    assert limiter.attempt("192.0.2.3") == 0.0
    assert limiter.attempt("192.0.2.1") == 0.0


def test_a_full_table_evicts_its_least_recently_used_bucket_only() -> None:
    """Every bucket busy and the table full: the least recently used one makes room, so a flood of new
    addresses cannot wipe the bucket of the one already held back (the table was emptied wholesale)."""
    now = [0.0]
    limiter = SourceLimiter(period=6.0, burst=2, block_burst=100, max_tracked=3, clock=lambda: now[0])
    assert [limiter.attempt("192.0.2.1") for _ in range(3)] == [0.0, 0.0, 6.0]  # held back
    assert limiter.attempt("198.51.100.1") == 0.0
    assert limiter.attempt("203.0.113.1") == 0.0
    assert limiter.wait("192.0.2.1") == 6.0  # read: the most recently used again
    assert limiter.attempt("192.0.2.9") == 0.0  # a fourth source: 198.51.100.1's bucket makes room
    assert limiter.wait("192.0.2.1") == 6.0  # still held back, not forgotten


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.1", "192.0.2.0/24"),
        ("192.0.2.254", "192.0.2.0/24"),
        ("::ffff:192.0.3.1", "192.0.3.0/24"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1::/48"),
        ("2001:db8:1:ffff::1", "2001:db8:1::/48"),  # another /64 of the same site
        ("not an address", "not an address"),
    ],
)
def test_block_key(address: str, key: str) -> None:
    assert block_key(address) == key


LIMITS = {Tier.SOURCE: (6.0, 2), Tier.BLOCK: (2.0, 3), Tier.GLOBAL: (1.0, 4)}


@pytest.mark.parametrize(
    ("tats", "stored", "wait"),
    [
        ({}, {Tier.SOURCE: 106.0, Tier.BLOCK: 102.0, Tier.GLOBAL: 101.0}, 0.0),
        # the source's burst spent (2 x 6 s ahead): refused, nothing taken from the others
        ({Tier.SOURCE: 112.0}, {}, 6.0),
        ({Tier.BLOCK: 106.0}, {}, 2.0),  # the block's spent
        ({Tier.GLOBAL: 104.0}, {}, 1.0),  # everyone's spent
        ({Tier.SOURCE: 112.0, Tier.GLOBAL: 110.0}, {}, 7.0),  # the longest wait
    ],
)
def test_attempt(tats: dict[Tier, float | None], stored: dict[Tier, float], wait: float) -> None:
    assert attempt(tats, 100.0, LIMITS) == (stored, wait)


def test_many_addresses_are_held_by_their_block_then_by_everyone() -> None:
    limiter = SourceLimiter(block_burst=4, global_burst=10, clock=lambda: 0.0)
    one_block = [limiter.attempt(f"192.0.2.{i}") == 0 for i in range(6)]
    assert one_block == [True] * 4 + [False] * 2  # each address within its own, the /24 held
    v6 = [limiter.attempt(f"2001:db8:1:{i:x}::1") == 0 for i in range(6)]
    assert v6 == [True] * 4 + [False] * 2  # each /64 within its own, the /48 held
    many = [limiter.attempt(f"10.{i}.0.1") == 0 for i in range(5)]
    assert many == [True] * 2 + [False] * 3  # every /24 within its own, everyone held at 10
