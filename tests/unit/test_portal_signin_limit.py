"""Table of the portal's per-source sign-in limit (portal.signin_limit): GCRA per source address."""

from __future__ import annotations

import pytest

from portal.signin_limit import SourceLimiter, source_key, take


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
