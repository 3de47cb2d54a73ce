"""The schemas and ``data`` builders of the account's operational traffic events (the event catalog,
``svckit.eventkinds``, lists the kinds; authsvc publishes them; docs/operations.md "Look-to-book" and
"Anomaly alerts" say when). Standard library only."""

from __future__ import annotations

import datetime as dt
from typing import Any

from svckit.eventschemas import date_field, int_field, object_schema, string_field, timestamp_field

LOOK_TO_BOOK = "account.look_to_book_exceeded"
ANOMALY = "account.anomaly"
ANOMALY_KINDS = ("error_rate", "latency")


def timestamp(when: dt.datetime) -> str:
    """RFC 3339 UTC with milliseconds (as ``svckit.catalog.timestamp``, which imports this module's kinds)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _number(description: str) -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "description": description}


LOOK_TO_BOOK_SCHEMA = object_schema(
    LOOK_TO_BOOK,
    {
        "from": date_field("the window's first UTC day"),
        "to": date_field("the window's last UTC day (today, so far)"),
        "searches": int_field("live searches in the window", minimum=1),
        "bookings": int_field("confirmed live bookings in the window", minimum=0),
        "searchesPerBooking": _number(
            "searches per booking over the window; with no booking, the searches themselves"
        ),
        "target": int_field("the account's contractual target, searches per booking", minimum=1),
    },
    ["from", "to", "searches", "bookings", "searchesPerBooking", "target"],
)

ANOMALY_SCHEMA = object_schema(
    ANOMALY,
    {
        "anomaly": {"enum": list(ANOMALY_KINDS), "description": "what jumped"},
        "since": timestamp_field("the start of the hour judged"),
        "until": timestamp_field("its end"),
        "environment": string_field("the keys' environment", enum=["live", "sandbox"]),
        "requests": int_field("requests answered in the hour", minimum=1),
        "errors": int_field("of them, answers with a status of 400 or more", minimum=0),
        "errorRate": _number("errors / requests in the hour (0 to 1)"),
        "baselineErrorRate": _number("the same over the 7 days before the hour"),
        "p95Ms": _number("the hour's 95th percentile latency, milliseconds"),
        "baselineP95Ms": _number("the same over the 7 days before the hour"),
    },
    [
        "anomaly",
        "since",
        "until",
        "environment",
        "requests",
        "errors",
        "errorRate",
        "baselineErrorRate",
        "p95Ms",
        "baselineP95Ms",
    ],
)


def look_to_book_exceeded(
    first: dt.date, last: dt.date, searches: int, bookings: int, target: int
) -> dict[str, Any]:
    """``data`` of account.look_to_book_exceeded."""
    return {
        "from": first.isoformat(),
        "to": last.isoformat(),
        "searches": searches,
        "bookings": bookings,
        "searchesPerBooking": round(searches / max(bookings, 1), 1),
        "target": target,
    }


def anomaly(
    kind: str,
    since: dt.datetime,
    environment: str,
    requests: int,
    errors: int,
    p95_ms: float,
    baseline_error_rate: float,
    baseline_p95_ms: float,
) -> dict[str, Any]:
    """``data`` of account.anomaly for the hour starting ``since``."""
    return {
        "anomaly": kind,
        "since": timestamp(since),
        "until": timestamp(since + dt.timedelta(hours=1)),
        "environment": environment,
        "requests": requests,
        "errors": errors,
        "errorRate": round(errors / requests, 4) if requests else 0.0,
        "baselineErrorRate": round(baseline_error_rate, 4),
        "p95Ms": round(p95_ms, 1),
        "baselineP95Ms": round(baseline_p95_ms, 1),
    }


def sample(kind: str, now: dt.datetime) -> dict[str, Any]:
    """The sandbox's sample ``data`` of one of these kinds at ``now``."""
    today = now.astimezone(dt.UTC).date()
    if kind == LOOK_TO_BOOK:
        return look_to_book_exceeded(today - dt.timedelta(days=7), today, 48_000, 20, 1500)
    if kind == ANOMALY:
        hour = now.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=1)
        return anomaly("error_rate", hour, "live", 1_200, 300, 240.0, 0.012, 210.0)
    raise KeyError(kind)
