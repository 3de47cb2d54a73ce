"""When endpoint health is announced (``webhookd._health``), by table."""

from __future__ import annotations

import pytest

from webhookd._health import attempts_for, failing_level, recovered
from webhookd._retry import MAX_ATTEMPTS


@pytest.mark.parametrize(
    ("failed", "level"),
    [(1, 0), (2, 0), (3, 0), (4, 50), (5, 50), (6, 90), (MAX_ATTEMPTS, 0)],
)
def test_failing_level_by_failed_attempts(failed: int, level: int) -> None:
    assert failing_level(failed) == level


def test_levels_fall_before_disabling() -> None:
    assert attempts_for(50) == 4 and attempts_for(90) == 6 and attempts_for(90) < MAX_ATTEMPTS


@pytest.mark.parametrize(
    ("stored", "succeeded", "announce"),
    [
        (0, True, False),
        (50, True, True),
        (90, True, True),
        (100, True, True),
        (90, False, False),
        (0, False, False),
    ],
)
def test_recovered(stored: int, succeeded: bool, announce: bool) -> None:
    assert recovered(stored, succeeded) is announce
