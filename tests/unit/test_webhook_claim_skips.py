"""``_delivery.covers``: when a claim that found nothing still answers for the next one (it skips at least
as much), so the worker does not run it (a walk of every skipped due row on PostgreSQL)."""

from __future__ import annotations

import pytest

from webhookd._admission import Skips
from webhookd._delivery import covers

EP = Skips(endpoints=("we_1",))
EP_ACCT = Skips(endpoints=("we_1",), accounts=("live:acct_1",))
CASES = [
    ("the same skips", EP, EP, True),
    ("more endpoints skipped", Skips(endpoints=("we_1", "we_2")), EP, True),
    ("an account skipped as well", EP_ACCT, EP, True),
    ("the account no longer skipped: its other endpoints may have rows", EP, EP_ACCT, False),
    ("another endpoint skipped instead", Skips(endpoints=("we_2",)), EP, False),
    ("nothing skipped", Skips(), EP, False),
    ("an environment skipped as well", Skips(endpoints=("we_1",), environments=("sandbox",)), EP, True),
    (
        "retries no longer skipped",
        EP,
        Skips(endpoints=("we_1",), retries_in=("live",)),
        False,
    ),
    ("order does not matter", Skips(endpoints=("we_2", "we_1")), Skips(endpoints=("we_1", "we_2")), True),
]


@pytest.mark.parametrize(("why", "skipped", "found_nothing", "expected"), CASES, ids=[c[0] for c in CASES])
def test_covers(why: str, skipped: Skips, found_nothing: Skips, expected: bool) -> None:
    assert covers(skipped, found_nothing) is expected, why
