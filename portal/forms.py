"""Reading the portal's forms: fields as strings, times, periods, lines, and words of proto enums."""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf import timestamp_pb2
from sanic import Request

from svckit.clients import ClientError
from svckit.protos import timestamp
from svckit.prototables import EnumTable


class Fields:
    """Form fields as strings ("" when absent)."""

    def __init__(self, request: Request[Any, Any], source: str = "form") -> None:
        self._form: Any = (request.args if source == "args" else request.form) or {}

    def get(self, name: str, default: str = "") -> str:
        value = self._form.get(name)
        return default if value is None else str(value)

    def getlist(self, name: str) -> list[str]:
        getlist = getattr(self._form, "getlist", None)
        return [str(v) for v in (getlist(name) or [])] if getlist else []


def fields(request: Request[Any, Any]) -> Fields:
    return Fields(request)


def query(request: Request[Any, Any]) -> Fields:
    """The query string's fields (a GET form: a confirmation page's choices)."""
    return Fields(request, "args")


def when(text: str, field: str) -> timestamp_pb2.Timestamp | None:
    """A date and time typed in a form (UTC unless it says otherwise); None when empty."""
    if not text:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ClientError(
            "invalid_request", "expected a date and time like 2026-11-23T10:00", field=field
        ) from None
    return timestamp(parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC))


def period_seconds(form: Fields, name: str) -> int:
    """A key's grace or a signing secret's overlap, asked for in hours (default 24, at most 7 days)."""
    try:
        hours = float(form.get(name, "24"))
    except ValueError:
        hours = -1
    if not 0 <= hours <= 168:
        raise ClientError("invalid_request", "choose between 0 and 168 hours (7 days)", field=name)
    return int(hours * 3600)


INT32_MAX = 2**31 - 1


def whole_number(form: Fields, name: str, hi: int = INT32_MAX) -> int:
    """A field's whole number from 0 to ``hi`` (blank: 0), as ASCII digits; anything else is a 400 beside
    the field (issue 34: past the proto field's int32 it was a 500; ``²`` passes ``isdigit`` and failed
    ``int``). A service's own range is checked by the service."""
    text = form.get(name, "").strip() or "0"
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(hi)) and int(text) <= hi):
        raise ClientError("invalid_request", f"a whole number from 0 to {hi:,}", field=name)
    return int(text)


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]


def number_of(table: EnumTable[Any], word: str) -> Any:
    """The proto number of ``word``; 0 (UNSPECIFIED) for "" or a word the table lacks."""
    try:
        return table.pb(word)
    except ValueError:
        return 0
