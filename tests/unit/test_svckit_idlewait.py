"""svckit.idlewait.idle_wait by table: the first wait, the doubling, the cap, a cap that turns it off."""

from __future__ import annotations

import pytest

from svckit.idlewait import idle_wait


@pytest.mark.parametrize(
    ("empty", "first", "most", "expected"),
    [
        (0, 0.25, 5.0, 0.25),  # nothing found yet (a reset): the plain poll
        (1, 0.25, 5.0, 0.25),  # the first empty look
        (2, 0.25, 5.0, 0.5),  # then doubling
        (3, 0.25, 5.0, 1.0),
        (5, 0.25, 5.0, 4.0),
        (6, 0.25, 5.0, 5.0),  # 8.0 capped
        (10_000, 0.25, 5.0, 5.0),  # a long idle spell: capped, no overflow
        (-1, 1.0, 30.0, 1.0),  # never below the first
        (4, 1.0, 1.0, 1.0),  # a cap at the poll: the plain poll (no backoff)
        (4, 1.0, 0.5, 1.0),  # a cap below the poll: still the poll, never faster
        (3, 1.0, 3.0, 3.0),  # 4.0 capped
    ],
)
def test_idle_wait(empty: int, first: float, most: float, expected: float) -> None:
    assert idle_wait(empty, first, most) == expected
