"""portal.signin_limit.SourceLimiter.wait: the refusal known before a sign-in is read, counting nothing."""

from __future__ import annotations

from portal.signin_limit import SourceLimiter


def test_wait_tells_the_refusal_without_counting_an_attempt() -> None:
    now = [0.0]
    limiter = SourceLimiter(period=6.0, burst=2, clock=lambda: now[0])
    for _ in range(10):
        assert limiter.wait("192.0.2.1") == 0  # asked often, it spends nothing
    assert [limiter.attempt("192.0.2.1") for _ in range(3)] == [0, 0, 6.0]
    assert limiter.wait("192.0.2.1") == 6.0 and limiter.wait("192.0.2.2") == 0
    now[0] = 6.0
    assert limiter.wait("192.0.2.1") == 0 and limiter.attempt("192.0.2.1") == 0


def test_wait_sees_the_network_and_global_tiers() -> None:
    limiter = SourceLimiter(
        block_period=100.0, block_burst=1, global_period=100.0, global_burst=5, clock=lambda: 0.0
    )
    assert limiter.attempt("198.51.100.1") == 0
    assert limiter.wait("198.51.100.2") > 0  # its /24 is spent
    assert limiter.wait("203.0.113.1") == 0
