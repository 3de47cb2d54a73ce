"""The time range and groupBy of GET /v1/usage and /v1/usage/webhooks (edge.blueprints.usage), by table:
what the OpenAPI document calls a valid ``from``/``to`` (a date, or a date-time with a zone) is taken, or
refused with 400 naming the parameter; never a 500, even at the calendar's ends (found by schemathesis)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from edge.blueprints.usage import GROUPS, group_words, time_range
from edge.exceptions import EdgeError
from edge.openapi_usage import GROUP_BY

NOW = dt.datetime(2026, 11, 29, 10, 30, tzinfo=dt.UTC)
UTC = dt.UTC


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ({}, (dt.datetime(2026, 11, 29, tzinfo=UTC), dt.datetime(2026, 11, 30, tzinfo=UTC))),
        (
            {"from": "2026-11-01"},
            (dt.datetime(2026, 11, 1, tzinfo=UTC), dt.datetime(2026, 11, 30, tzinfo=UTC)),
        ),
        (
            {"from": "2026-11-29T10:00:00+02:00", "to": "2026-11-29T10:00:00z"},
            (dt.datetime(2026, 11, 29, 8, tzinfo=UTC), dt.datetime(2026, 11, 29, 10, tzinfo=UTC)),
        ),
        (
            {"from": "9999-12-31"},
            (dt.datetime(9999, 12, 31, tzinfo=UTC), dt.datetime.max.replace(tzinfo=UTC)),
        ),
        (
            {"from": "0001-01-01T00:00:00Z"},
            (dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(2026, 11, 30, tzinfo=UTC)),
        ),
    ],
)
def test_a_valid_range_is_taken(args: dict[str, str], want: tuple[dt.datetime, dt.datetime]) -> None:
    assert time_range(args, NOW) == want


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"from": "0000000000000000000000000000000000000000"}, "from must be a day"),
        ({"from": "0001-01-01T00:00:00+05:00"}, "from must be a day"),  # before the calendar's start in UTC
        ({"to": "9999-12-31T23:00:00-05:00"}, "to must be a day"),  # past its end
        ({"from": "2026-11-29T10:00:00"}, "from must be a day"),  # no zone
        ({"from": "2026-11-29", "to": "2026-11-28"}, "to must be after from"),
    ],
)
def test_a_bad_range_is_refused_naming_the_parameter(args: dict[str, str], named: str) -> None:
    with pytest.raises(EdgeError, match=named):
        time_range(args, NOW)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("", []),
        ("key", ["key"]),
        ("key,route,hour", ["key", "route", "hour"]),
        ("hour,key", ["hour", "key"]),
        ("key,status,key", ["key", "status"]),  # given again: counts once
        ("hour,day", None),  # at most one of them
        ("key, route", None),  # no spaces
        ("week", None),
        ("key,", None),
    ],
)
def test_group_by_takes_what_the_document_says(raw: str, words: list[str] | None) -> None:
    """The OpenAPI pattern and the handler agree, both ways (schemathesis checks each against the other)."""
    assert bool(re.search(GROUP_BY, raw)) is (words is not None)
    if words is None:
        with pytest.raises(EdgeError, match="groupBy"):
            group_words(raw, GROUPS)
    else:
        assert group_words(raw, GROUPS) == words
