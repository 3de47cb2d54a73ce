"""When the edge reports its Redis down (edge_ratelimit_redis_up 0, RedisDown's input): after a failure
that lasted DOWN_AFTER with no answer between, never on one slow call; up at the first answer."""

from __future__ import annotations

import pytest

from edge.sharedlimit import DOWN_AFTER, reported_up

CASES = [
    # (failing since, now, reported before, reported after, why)
    (None, 5.0, None, True, "an answer before anything was known: up"),
    (None, 5.0, False, True, "an answer after an outage: up at once"),
    (5.0, 5.0, None, None, "the first failure at start: not known yet (start pings again)"),
    (5.0, 5.0, True, True, "one failure (a starved process's timeout looks the same): still up"),
    (5.0, 5.0 + DOWN_AFTER / 2, True, True, "failing for less than DOWN_AFTER: still up"),
    (5.0, 5.0 + DOWN_AFTER, True, False, "failing for DOWN_AFTER with no answer between: down"),
    (5.0, 5.0 + DOWN_AFTER, None, False, "at start, failing for DOWN_AFTER: down"),
    (5.0, 60.0, False, False, "still failing: still down"),
]


@pytest.mark.parametrize(("since", "now", "before", "after", "why"), CASES, ids=[c[-1] for c in CASES])
def test_reported_up(
    since: float | None, now: float, before: bool | None, after: bool | None, why: str
) -> None:
    assert reported_up(since, now, before) is after, why
