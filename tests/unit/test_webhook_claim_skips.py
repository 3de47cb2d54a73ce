"""``_delivery.covers``: when a claim that found nothing still answers for the next one (it skips at least
as much), so the worker does not run it (a walk of every skipped due row on PostgreSQL)."""

from __future__ import annotations

import pytest

from webhookd._admission import Skips, covers

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
    ("probation as well", Skips(endpoints=("we_1",), probation=("live:a",), proven=("we_2",)), EP, True),
    ("an account in probation fully skipped now", Skips(accounts=("live:a",)),
     Skips(probation=("live:a",), proven=("we_2",)), True),
    ("probation no longer", Skips(), Skips(probation=("live:a",)), False),
    ("one more proven endpoint claimed", Skips(probation=("live:a",), proven=("we_2", "we_3")),
     Skips(probation=("live:a",), proven=("we_2",)), False),
    ("a proven endpoint fewer", Skips(probation=("live:a",)), Skips(probation=("live:a",), proven=("we_2",)),
     True),
    ("order does not matter", Skips(endpoints=("we_2", "we_1")), Skips(endpoints=("we_1", "we_2")), True),
]  # fmt: skip


@pytest.mark.parametrize(("why", "skipped", "found_nothing", "expected"), CASES, ids=[c[0] for c in CASES])
def test_covers(why: str, skipped: Skips, found_nothing: Skips, expected: bool) -> None:
    assert covers(skipped, found_nothing) is expected, why
