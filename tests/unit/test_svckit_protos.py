"""svckit.protos: Timestamp and Struct as every service converts them."""

from __future__ import annotations

import datetime as dt

import pytest
from google.protobuf import timestamp_pb2

from svckit.protos import datetime_of, struct, struct_to_dict, timestamp

AWARE = dt.datetime(2026, 11, 24, 13, 56, 7, 123456, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (AWARE, AWARE),
        (AWARE.replace(tzinfo=None), AWARE),  # naive is UTC
        (AWARE.astimezone(dt.timezone(dt.timedelta(hours=-5))), AWARE),  # another zone, same instant
        (dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC), dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)),
    ],
)
def test_timestamp_round_trip(value: dt.datetime, expected: dt.datetime) -> None:
    back = datetime_of(timestamp(value))
    assert back == expected and back is not None and back.tzinfo is dt.UTC


def test_unset_is_none_both_ways() -> None:
    assert timestamp(None) is None
    assert datetime_of(None) is None
    assert datetime_of(timestamp_pb2.Timestamp()) is None


def test_struct_gives_integral_numbers_back_as_integers() -> None:
    data = {"n": 3, "x": 1.5, "big": 2**53 + 2, "nested": {"list": [1, 2.0, "a", None, True]}}
    back = struct_to_dict(struct(data))
    assert back["n"] == 3 and isinstance(back["n"], int)
    assert back["x"] == 1.5
    assert isinstance(back["big"], float)  # beyond 2**53 a double is not an exact integer
    assert back["nested"] == {"list": [1, 2, "a", None, True]}
