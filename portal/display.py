"""What templates show: the filters and the proto-enum words (from ``svckit.prototables``, by name)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from google.protobuf import struct_pb2

from portal.webhook_destinations import destination_label
from portal.webhook_views import CLOCK_CHOICES, pretty_json
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


def plain(value: Any) -> str:
    """A value of an audit record as words: lists joined, whole numbers without ".0", yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(plain(v) for v in value) or "(none)"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value) if value != "" else "(empty)"


# Shown in its own column of the audit page.
_SHOWN_ELSEWHERE = frozenset({"endpoint_id"})


def changes(event: Any) -> list[tuple[str, str | None, str | None]]:
    """An audit record's change as rows (field, before, after), by field name; None: not in that side."""
    before = struct_to_dict(event.before) if event.before.fields else {}
    after = struct_to_dict(event.after) if event.after.fields else {}
    rows: list[tuple[str, str | None, str | None]] = []
    for name in sorted(set(before) | set(after)):
        if name in _SHOWN_ELSEWHERE and name not in before:
            continue
        rows.append(
            (
                name,
                plain(before[name]) if name in before else None,
                plain(after[name]) if name in after else None,
            )
        )
    return rows


FILTERS: dict[str, Any] = {
    "fmt": fmt,
    "countdown": countdown,
    "ts": datetime_of,
    "details": details,
    "changes": changes,
    "pretty_json": pretty_json,
    "destination": destination_label,
}
# {proto number: word}; an attempt's outcome reads "http error" on the page, not "http_error".
GLOBALS: dict[str, Any] = {
    "KEY_STATUS": prototables.KEY_STATUS.names(),
    "DELIVERY_STATUS": prototables.DELIVERY_STATUS.names(),
    "ENDPOINT_STATUS": prototables.ENDPOINT_STATUS.names(),
    "HOOKS_ENVIRONMENT": prototables.HOOKS_ENVIRONMENT.names(),
    "ACCOUNT_MODE": prototables.ACCOUNT_MODE.names(),
    "OUTCOME": {n: word.replace("_", " ") for n, word in prototables.ATTEMPT_OUTCOME.names().items()},
    "ROLE_NAMES": prototables.USER_ROLE.names(),
    "CLOCK_CHOICES": CLOCK_CHOICES,
}
