"""The protobuf well-known types as every service uses them: Timestamp <-> datetime, Struct <-> dict."""

from __future__ import annotations

import datetime as dt
from typing import Any, overload

from google.protobuf import json_format, struct_pb2, timestamp_pb2


@overload
def timestamp(value: dt.datetime) -> timestamp_pb2.Timestamp: ...
@overload
def timestamp(value: None) -> None: ...
@overload
def timestamp(value: dt.datetime | None) -> timestamp_pb2.Timestamp | None: ...
def timestamp(value: dt.datetime | None) -> timestamp_pb2.Timestamp | None:
    """``value`` to the microsecond (naive is UTC); None stays None, an unset field."""
    if value is None:
        return None
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def datetime_of(value: timestamp_pb2.Timestamp | None) -> dt.datetime | None:
    """An aware UTC datetime; None for an unset (all-zero) Timestamp."""
    if value is None or (value.seconds == 0 and value.nanos == 0):
        return None
    return value.ToDatetime(tzinfo=dt.UTC)


def struct(values: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(values)
    return out


def _ints(value: Any) -> Any:
    # Struct carries every number as a double: give integral ones back as JSON integers.
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def struct_to_dict(value: struct_pb2.Struct) -> dict[str, Any]:
    """The JSON object of ``value``, integral numbers as integers."""
    out: dict[str, Any] = _ints(json_format.MessageToDict(value))
    return out
