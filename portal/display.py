"""What templates show: the filters and the proto-enum words (from ``svckit.prototables``, by name)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from google.protobuf import struct_pb2

from svckit import prototables
from svckit.protos import datetime_of, struct_to_dict


def fmt(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def countdown(value: dt.datetime | None) -> str:
    if value is None:
        return ""
    left = int((value - dt.datetime.now(dt.UTC)).total_seconds())
    if left <= 0:
        return "expired"
    hours, rest = divmod(left, 3600)
    return f"expires in {hours} h {rest // 60} min"


def details(value: struct_pb2.Struct) -> str:
    """An audit record's before or after as compact JSON (whole numbers without ".0")."""
    return json.dumps(struct_to_dict(value), ensure_ascii=False, sort_keys=True) if value.fields else ""


FILTERS: dict[str, Any] = {"fmt": fmt, "countdown": countdown, "ts": datetime_of, "details": details}
# {proto number: word}; an attempt's outcome reads "http error" on the page, not "http_error".
GLOBALS: dict[str, Any] = {
    "KEY_STATUS": prototables.KEY_STATUS.names(),
    "DELIVERY_STATUS": prototables.DELIVERY_STATUS.names(),
    "ENDPOINT_STATUS": prototables.ENDPOINT_STATUS.names(),
    "ACCOUNT_MODE": prototables.ACCOUNT_MODE.names(),
    "OUTCOME": {n: word.replace("_", " ") for n, word in prototables.ATTEMPT_OUTCOME.names().items()},
    "ROLE_NAMES": prototables.USER_ROLE.names(),
}
