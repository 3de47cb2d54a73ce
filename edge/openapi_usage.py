"""The OpenAPI operations of GET /v1/usage and GET /v1/usage/webhooks (edge.blueprints.usage): their
parameters, their rows, and the CSV they also answer with ``Accept: text/csv``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edge.openapi_schemas import query

USAGE_TEXT = (
    "Required scope: `account:read`. The account's requests, counted exactly (never sampled) by every edge "
    "and flushed every few seconds: a request shows here within seconds of its answer. Requests are "
    "counted per key, route template, status, error type and minute, with a latency histogram; rows are "
    "grouped as `groupBy` asks, each naming its group values, its `count` and `latencyMs` (p50, p95, p99 "
    "read from fixed buckets: the upper bound, in ms, of the bucket the percentile falls in). Minute "
    "counts are kept 48 hours, hour counts 90 days, day counts 2 years; a range must be on whole hours "
    "(whole days past 90 days, whole minutes within 48 hours). With `Accept: text/csv` the same rows as "
    "CSV (latencyMs as three columns)."
)
WEBHOOK_TEXT = (
    "Required scope: `account:read`. The account's webhook delivery attempts in the key's environment, per "
    "endpoint and outcome (succeeded, http_error, timeout, network_error), counted exactly as they are "
    "made, with latency percentiles. Hour counts are kept 90 days, day counts 2 years. With "
    "`Accept: text/csv`, CSV."
)
LATENCY = {
    "type": "object",
    "properties": {n: {"type": "integer", "minimum": 0} for n in ("p50", "p95", "p99")},
    "required": ["p50", "p95", "p99"],
}
# A day or an RFC 3339 time with a zone (edge.blueprints.usage._moment), as formats a generator honours.
MOMENT = {"type": "string", "maxLength": 40, "anyOf": [{"format": "date"}, {"format": "date-time"}]}
# groupBy of GET /v1/usage (edge.blueprints.usage.group_words): its words comma-separated, at most one of
# hour and day (a word given twice counts once).
_DIMENSION = "(key|route|status|errorType|environment)"
GROUP_BY = f"^(|{_DIMENSION}(,{_DIMENSION})*(,(hour|day)(,{_DIMENSION})*)?|(hour|day)(,{_DIMENSION})*)$"
FROM = query(
    "from",
    MOMENT,
    "start, a day (2026-11-29) or an RFC 3339 time (2026-11-29T10:00:00Z), inclusive; "
    "default today's start (UTC)",
)
TO = query(
    "to",
    MOMENT,
    "end, exclusive, as from; default the end of today (UTC)",
)
USAGE_ROW = {
    "type": "object",
    "properties": {
        "key": {"type": "string", "description": "the key id (groupBy key; empty: no key)"},
        "route": {"type": ["string", "null"], "description": "e.g. `GET /v1/hotels/search` (groupBy route)"},
        "status": {"type": "integer", "description": "the HTTP status answered (groupBy status)"},
        "errorType": {"type": ["string", "null"], "description": "the error's type; null: no error"},
        "environment": {"type": "string", "enum": ["live", "sandbox"]},
        "hour": {"type": "string", "format": "date-time", "description": "the hour's start (groupBy hour)"},
        "day": {"type": "string", "format": "date", "description": "the day (groupBy day)"},
        "count": {"type": "integer", "minimum": 1},
        "latencyMs": LATENCY,
    },
    "required": ["count", "latencyMs"],
}
DELIVERY_ROW = {
    "type": "object",
    "properties": {
        "endpoint": {"type": "string"},
        "outcome": {"type": "string", "enum": ["succeeded", "http_error", "timeout", "network_error"]},
        "hour": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "count": {"type": "integer", "minimum": 1},
        "latencyMs": LATENCY,
    },
    "required": ["endpoint", "outcome", "count", "latencyMs"],
}


def _list(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": row},
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            "environment": {"type": "string", "enum": ["live", "sandbox", "all"]},
        },
        "required": ["object", "data", "from", "to"],
    }


def _with_csv(op: dict[str, Any]) -> dict[str, Any]:
    op["responses"]["200"]["content"]["text/csv"] = {
        "schema": {"type": "string", "description": "a header line, then one line per row"}
    }
    op["responses"]["406"] = {"$ref": "#/components/responses/Error406"}
    return op


def usage_paths(op: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The two path items, each made by ``op`` (edge.openapi's operation builder)."""
    usage = op(
        "getUsage",
        "Count the account's requests: per key, route, status, error type, hour or day",
        "account:read",
        schema=_list(USAGE_ROW),
        params=[
            FROM,
            TO,
            query(
                "groupBy",
                {"type": "string", "pattern": GROUP_BY},
                "comma-separated: key, route, status, errorType, environment, and at most one of hour, day; "
                "none: one row of totals",
            ),
            query(
                "environment",
                {"type": "string", "enum": ["live", "sandbox", "all"]},
                "whose requests: default the key's own environment",
            ),
            query(
                "key",
                {"type": "string", "maxLength": 40, "pattern": "^(key_[ -~]*)?$"},
                "only this key's requests (key_...)",
            ),
            query("status", {"type": "integer", "minimum": 100, "maximum": 599}, "only this status"),
        ],
    )
    usage["description"] = USAGE_TEXT
    hooks = op(
        "getWebhookUsage",
        "Count the account's webhook delivery attempts per endpoint and outcome",
        "account:read",
        schema=_list(DELIVERY_ROW),
        params=[
            FROM,
            TO,
            query("groupBy", {"type": "string", "enum": ["hour", "day"]}, "per hour or day; none: totals"),
            query("endpoint", {"type": "string", "maxLength": 64}, "only this endpoint (we_...)"),
        ],
    )
    hooks["description"] = WEBHOOK_TEXT
    return {"/v1/usage": {"get": _with_csv(usage)}, "/v1/usage/webhooks": {"get": _with_csv(hooks)}}
