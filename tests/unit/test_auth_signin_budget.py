"""The global budget of sign-in password checks (authsvc._signin_budget), by table."""

from __future__ import annotations

import pytest

from authsvc._signin_budget import spend

# rate 2 a second (one per 0.5 s), burst 3: (checks allowed before, at t=0; the check's time; allowed;
# retry_after)
CASES = [
    (0, 0.0, True, 0.0),
    (2, 0.0, True, 0.0),
    (3, 0.0, False, 0.5),  # the burst spent
    (3, 0.25, False, 0.25),
    (3, 0.5, True, 0.0),  # one refilled
    (10, 0.0, False, 0.5),  # refused checks are not counted: it refills as after 3
]


@pytest.mark.parametrize(("before", "at", "allowed", "retry_after"), CASES)
def test_spend(before: int, at: float, allowed: bool, retry_after: float) -> None:
    tat: float | None = None
    for _ in range(before):
        got = spend(tat, 0.0, rate=2.0, burst=3)
        tat = got.tat
    got = spend(tat, at, rate=2.0, burst=3)
    assert got.allowed is allowed
    assert got.retry_after == pytest.approx(retry_after)
    if not allowed:
        assert got.tat == tat  # a refusal changes nothing


def test_no_rate_is_no_budget() -> None:
    tat: float | None = None
    for _ in range(1000):
        got = spend(tat, 0.0, rate=0.0, burst=1)
        assert got.allowed
        tat = got.tat
