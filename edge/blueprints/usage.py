"""GET /v1/usage and GET /v1/usage/webhooks: the account's exact usage counts (authsvc's rollups, fed by
every edge: edge.usagecounts) and its webhook delivery counts (webhookd), as JSON or, with ``Accept:
text/csv``, as CSV.

Scope: ``account:read``. The counts are the account's, never another's: the account is the key's.
``environment`` picks whose requests: the key's own environment by default, ``live``, ``sandbox`` or
``all`` (GET /v1/usage only; the counts hold no resource of the other environment, only numbers).
Parameters (docs/edge.md "Usage"):

- ``from``, ``to``: a day (``2026-11-29``) or an RFC 3339 time; [from, to). Default: today (UTC), from its
  start to its end; a ``from`` alone runs to the end of today.
- ``groupBy``: comma-separated ``key``, ``route``, ``status``, ``errorType``, ``environment`` and at most
  one of ``hour``, ``day``. None: one row of totals.
- ``key``: only this key's requests (key_...); ``status``: only this status.

Each row names its group values and its ``count``, with ``latencyMs`` {p50, p95, p99} read from the
fixed latency buckets (svckit.usagecounts).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.blueprints.webhooks import query_args
from edge.context import EdgeRequest
from edge.exceptions import EdgeError
from edge.gate import Ctx, guarded
from edge.responses import EdgeResponse, json_response
from svckit.protos import timestamp as ts
from svckit.prototables import AUTH_ENVIRONMENT, HOOKS_ENVIRONMENT
from travel.auth.v1 import auth_pb2
from travel.webhooks.v1 import webhooks_pb2

bp = Blueprint("usage")

SCOPE = "account:read"
# groupBy words -> the RPC's groups (and the row field each names).
GROUPS = {
    "key": auth_pb2.USAGE_GROUP_KEY,
    "route": auth_pb2.USAGE_GROUP_ROUTE,
    "status": auth_pb2.USAGE_GROUP_STATUS,
    "errorType": auth_pb2.USAGE_GROUP_ERROR_TYPE,
    "environment": auth_pb2.USAGE_GROUP_ENVIRONMENT,
    "hour": auth_pb2.USAGE_GROUP_HOUR,
    "day": auth_pb2.USAGE_GROUP_DAY,
}
WEBHOOK_GROUPS = {
    "hour": webhooks_pb2.DELIVERY_COUNT_GROUP_HOUR,
    "day": webhooks_pb2.DELIVERY_COUNT_GROUP_DAY,
}
ENVIRONMENTS = ("live", "sandbox", "all")
DAY = dt.timedelta(days=1)
LAST_DAY = dt.datetime.max.replace(tzinfo=dt.UTC) - DAY  # a from on the calendar's last day ends there


def _moment(value: str, name: str) -> dt.datetime:
    """A day (its start, UTC) or an RFC 3339 time with a zone; 400 naming the parameter otherwise."""
    try:
        if len(value) == 10:
            return dt.datetime.combine(dt.date.fromisoformat(value), dt.time(), dt.UTC)
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if when.tzinfo is not None:
            when = when.astimezone(dt.UTC)  # an offset at the calendar's ends: OverflowError
    except (ValueError, OverflowError):
        when = None
    if when is None or when.tzinfo is None:
        raise EdgeError(
            f"the query parameter {name} must be a day (2026-11-29) or an RFC 3339 time with a zone "
            "(2026-11-29T10:00:00Z)",
            type="invalid_request",
        )
    return when


def time_range(args: Any, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[from, to) of the query; default today (UTC)."""
    today = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = _moment(args.get("from"), "from") if args.get("from") is not None else today
    if args.get("to") is not None:
        end = _moment(args.get("to"), "to")
    else:  # the end of today; of from's day when from is later
        end = today + DAY if start < today + DAY else min(start, LAST_DAY) + DAY
    if end <= start:
        raise EdgeError("the query parameter to must be after from", type="invalid_request")
    return start, end


def group_words(raw: str | None, allowed: dict[str, Any]) -> list[str]:
    """The groupBy words in the order given (a word given again adds nothing); 400 naming the parameter
    for an unknown one (spaces included: the OpenAPI pattern has none) or both hour and day."""
    if raw is None or raw == "":
        return []
    words = list(dict.fromkeys(raw.split(",")))
    for word in words:
        if word not in allowed:
            raise EdgeError(
                f"the query parameter groupBy takes {', '.join(allowed)} (comma-separated), not {word!r}",
                type="invalid_request",
            )
    if {"hour", "day"} <= set(words):
        raise EdgeError(
            "the query parameter groupBy takes at most one of hour, day",
            type="invalid_request",
        )
    return words


def _period(stamp: Any, word: str) -> str:
    when: dt.datetime = stamp.ToDatetime(dt.UTC)
    return when.date().isoformat() if word == "day" else when.isoformat().replace("+00:00", "Z")


def usage_row(row: auth_pb2.UsageRow, words: list[str]) -> dict[str, Any]:
    c = row.counts
    out: dict[str, Any] = {}
    for word in words:
        if word == "key":
            out["key"] = c.key_id
        elif word == "route":
            out["route"] = c.route or None
        elif word == "status":
            out["status"] = c.status
        elif word == "errorType":
            out["errorType"] = c.error_type or None
        elif word == "environment":
            out["environment"] = AUTH_ENVIRONMENT.word(c.environment).value
        else:
            out[word] = _period(c.period_start, word)
    out["count"] = c.count
    out["latencyMs"] = {"p50": row.latency.p50_ms, "p95": row.latency.p95_ms, "p99": row.latency.p99_ms}
    return out


def as_csv(rows: list[dict[str, Any]], columns: list[str], filename: str) -> HTTPResponse:
    """The rows as CSV (RFC 4180, a header line), latencyMs as three columns."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([*columns, "count", "latencyP50Ms", "latencyP95Ms", "latencyP99Ms"])
    for row in rows:
        lat = row["latencyMs"]
        writer.writerow(
            [
                *("" if row[c] is None else row[c] for c in columns),
                row["count"],
                lat["p50"],
                lat["p95"],
                lat["p99"],
            ]
        )
    return EdgeResponse(
        out.getvalue(),
        content_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@bp.get("/v1/usage")
@guarded(SCOPE, csv=True)
async def get_usage(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """The account's requests counted per the groups asked for, over [from, to)."""
    args = query_args(request)
    start, end = time_range(args, dt.datetime.now(dt.UTC))
    words = group_words(args.get("groupBy"), GROUPS)
    env_word = args.get("environment") or ctx.environment
    if env_word not in ENVIRONMENTS:
        raise EdgeError(
            "the query parameter environment must be live, sandbox or all", type="invalid_request"
        )
    query = auth_pb2.QueryUsageCountsRequest(
        account_id=ctx.caller.account_id,
        environment=AUTH_ENVIRONMENT.pb(env_word) if env_word != "all" else auth_pb2.ENVIRONMENT_UNSPECIFIED,
        group_by=[GROUPS[w] for w in words],
    )
    getattr(query, "from").CopyFrom(ts(start))
    query.to.CopyFrom(ts(end))
    if args.get("key"):
        key = args.get("key")
        if not key.startswith("key_") or len(key) > 40 or not (key.isascii() and key.isprintable()):
            raise EdgeError("the query parameter key must be a key id (key_...)", type="invalid_request")
        query.key_id = key
    if args.get("status"):
        try:
            query.status = int(args.get("status"))
        except ValueError:
            query.status = 0
        if not 100 <= query.status <= 599:
            raise EdgeError(
                "the query parameter status must be an HTTP status (100-599)", type="invalid_request"
            )
    answer = await request.app.ctx.auth.query_usage_counts(query)
    rows = [usage_row(r, words) for r in answer.rows]
    if request.ctx.csv:
        return as_csv(rows, words, f"usage-{start.date().isoformat()}.csv")
    return json_response(
        {
            "object": "list",
            "data": rows,
            "from": start.isoformat().replace("+00:00", "Z"),
            "to": end.isoformat().replace("+00:00", "Z"),
            "environment": env_word,
        }
    )


def delivery_row(c: webhooks_pb2.DeliveryCount, word: str) -> dict[str, Any]:
    out: dict[str, Any] = {"endpoint": c.endpoint_id, "outcome": c.outcome}
    if word:
        out[word] = _period(c.period_start, word)
    out["count"] = c.count
    out["latencyMs"] = {"p50": c.p50_ms, "p95": c.p95_ms, "p99": c.p99_ms}
    return out


@bp.get("/v1/usage/webhooks")
@guarded(SCOPE, csv=True)
async def get_webhook_usage(request: EdgeRequest, ctx: Ctx) -> HTTPResponse:
    """The account's webhook delivery attempts per endpoint and outcome over [from, to), in the key's
    environment."""
    args = query_args(request)
    start, end = time_range(args, dt.datetime.now(dt.UTC))
    words = group_words(args.get("groupBy"), WEBHOOK_GROUPS)
    word = words[0] if words else ""
    query = webhooks_pb2.QueryDeliveryCountsRequest(
        account_id=ctx.caller.account_id,
        environment=HOOKS_ENVIRONMENT.pb(ctx.environment),
        group_by=WEBHOOK_GROUPS[word] if word else webhooks_pb2.DELIVERY_COUNT_GROUP_UNSPECIFIED,
    )
    getattr(query, "from").CopyFrom(ts(start))
    query.to.CopyFrom(ts(end))
    if args.get("endpoint"):
        query.endpoint_id = args.get("endpoint")
    answer = await request.app.ctx.hooks.query_delivery_counts(query)
    rows = [delivery_row(c, word) for c in answer.counts]
    if request.ctx.csv:
        return as_csv(rows, ["endpoint", "outcome", *words], f"webhook-usage-{start.date().isoformat()}.csv")
    return json_response(
        {
            "object": "list",
            "data": rows,
            "from": start.isoformat().replace("+00:00", "Z"),
            "to": end.isoformat().replace("+00:00", "Z"),
        }
    )
