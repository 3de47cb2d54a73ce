"""``svcctl usage --account ACCOUNT [--from D] [--to D] [--group-by key,route,...]``: any account's exact
usage counts (authsvc's rollups, AuthService.QueryUsageCounts) as a table; ``--anonymous`` instead of an
account: the requests refused before a key was accepted, which no partner sees. ``--webhooks``: the
account's webhook delivery attempts per endpoint and outcome (webhookd's QueryDeliveryCounts).

``--from`` / ``--to`` take a day (2026-11-29) or an RFC 3339 time; the default is today (UTC).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from svcctl.client import auth_client, hooks_client
from svckit.protos import timestamp as ts
from svckit.prototables import AUTH_ENVIRONMENT, HOOKS_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2 as wpb

GROUPS = {
    "key": pb.USAGE_GROUP_KEY,
    "route": pb.USAGE_GROUP_ROUTE,
    "status": pb.USAGE_GROUP_STATUS,
    "error-type": pb.USAGE_GROUP_ERROR_TYPE,
    "environment": pb.USAGE_GROUP_ENVIRONMENT,
    "minute": pb.USAGE_GROUP_MINUTE,
    "hour": pb.USAGE_GROUP_HOUR,
    "day": pb.USAGE_GROUP_DAY,
}
WEBHOOK_GROUPS = {"hour": wpb.DELIVERY_COUNT_GROUP_HOUR, "day": wpb.DELIVERY_COUNT_GROUP_DAY}
ENVIRONMENTS = {
    "live": pb.ENVIRONMENT_LIVE,
    "sandbox": pb.ENVIRONMENT_SANDBOX,
    "all": pb.ENVIRONMENT_UNSPECIFIED,
}


def moment(text: str) -> dt.datetime:
    """A day (its start, UTC) or an RFC 3339 time with a zone."""
    try:
        if len(text) == 10:
            return dt.datetime.combine(dt.date.fromisoformat(text), dt.time(), dt.UTC)
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a day or an RFC 3339 time: {text!r}") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"a time needs its zone (e.g. Z): {text!r}")
    return when.astimezone(dt.UTC)


def groups(text: str) -> list[str]:
    words = [w.strip() for w in text.split(",") if w.strip()]
    for word in words:
        if word not in GROUPS:
            raise argparse.ArgumentTypeError(f"--group-by takes {', '.join(GROUPS)}, not {word!r}")
    return words


def table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if c.replace(".", "").isdigit() else c.ljust(w)
            for c, w in zip(cells, widths, strict=True)
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _range(a: argparse.Namespace) -> tuple[dt.datetime, dt.datetime]:
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start: dt.datetime = a.start or today
    end: dt.datetime = a.end or (
        today + dt.timedelta(days=1) if start < today + dt.timedelta(days=1) else start + dt.timedelta(days=1)
    )
    return start, end


def _period(stamp: Any) -> str:
    return str(stamp.ToDatetime(dt.UTC).strftime("%Y-%m-%d %H:%M"))


def usage_table(rows: list[pb.UsageRow], words: list[str]) -> str:
    header = [*words, "count", "p50 ms", "p95 ms", "p99 ms"]
    lines = []
    total = 0
    for r in rows:
        c = r.counts
        cells = []
        for w in words:
            if w == "key":
                cells.append(c.key_id or "-")
            elif w == "route":
                cells.append(c.route or "-")
            elif w == "status":
                cells.append(str(c.status))
            elif w == "error-type":
                cells.append(c.error_type or "-")
            elif w == "environment":
                cells.append(AUTH_ENVIRONMENT.word(c.environment).value if c.environment else "-")
            else:
                cells.append(_period(c.period_start))
        total += c.count
        lines.append(
            [*cells, str(c.count), str(r.latency.p50_ms), str(r.latency.p95_ms), str(r.latency.p99_ms)]
        )
    return table(header, lines) + f"\n{len(rows)} rows, {total} requests"


async def _usage(a: argparse.Namespace) -> int:
    if bool(a.account) == a.anonymous:
        raise SystemExit("svcctl usage: give --account ACCOUNT or --anonymous")
    start, end = _range(a)
    if a.webhooks and a.anonymous:
        raise SystemExit("svcctl usage: --webhooks needs --account (deliveries always have one)")
    if a.webhooks:
        return await _webhooks(a, start, end)
    words: list[str] = a.group_by
    query = pb.QueryUsageCountsRequest(
        account_id="" if a.anonymous else a.account,
        anonymous=a.anonymous,
        environment=ENVIRONMENTS[a.environment],
        group_by=[GROUPS[w] for w in words],
        key_id=a.key,
    )
    getattr(query, "from").CopyFrom(ts(start))
    query.to.CopyFrom(ts(end))
    async with auth_client(a) as auth:
        answer = await auth.query_usage_counts(query)
    who = "requests with no accepted key" if a.anonymous else a.account
    print(f"{who}, {start.isoformat()} to {end.isoformat()}, environment {a.environment}")
    print(usage_table(list(answer.rows), words))
    return 0


async def _webhooks(a: argparse.Namespace, start: dt.datetime, end: dt.datetime) -> int:
    time_word = next((w for w in a.group_by if w in WEBHOOK_GROUPS), "")
    envs = ["live", "sandbox"] if a.environment == "all" else [a.environment]
    lines = []
    async with hooks_client(a) as hooks:
        for env in envs:
            query = wpb.QueryDeliveryCountsRequest(
                account_id=a.account,
                environment=HOOKS_ENVIRONMENT.pb(env),
                group_by=WEBHOOK_GROUPS.get(time_word, wpb.DELIVERY_COUNT_GROUP_UNSPECIFIED),
            )
            getattr(query, "from").CopyFrom(ts(start))
            query.to.CopyFrom(ts(end))
            for c in (await hooks.query_delivery_counts(query)).counts:
                period = [_period(c.period_start)] if time_word else []
                lines.append(
                    [
                        env,
                        c.endpoint_id,
                        c.outcome,
                        *period,
                        str(c.count),
                        str(c.p50_ms),
                        str(c.p95_ms),
                        str(c.p99_ms),
                    ]
                )
    header = [
        "environment",
        "endpoint",
        "outcome",
        *([time_word] if time_word else []),
        "count",
        "p50 ms",
        "p95 ms",
        "p99 ms",
    ]
    print(f"{a.account} webhook deliveries, {start.isoformat()} to {end.isoformat()}")
    print(table(header, lines))
    return 0


def register(groups_: Any) -> None:
    """Flags of ``svcctl usage`` itself (without a command): the group svcctl.auth_commands made, whose
    ``get`` and ``consume`` commands stay the search allowance's."""
    p: argparse.ArgumentParser = groups_.choices["usage"]
    p.description = __doc__
    p.add_argument("--account", default="", help="the account (acct_...)")
    p.add_argument("--anonymous", action="store_true", help="the requests refused before a key was accepted")
    p.add_argument(
        "--from", dest="start", type=moment, default=None, help="a day or RFC 3339 time (default today)"
    )
    p.add_argument("--to", dest="end", type=moment, default=None, help="exclusive (default the end of today)")
    p.add_argument(
        "--group-by",
        type=groups,
        default=["key", "route", "status"],
        help=f"comma-separated: {', '.join(GROUPS)}",
    )
    p.add_argument("--environment", choices=sorted(ENVIRONMENTS), default="all", help="default all")
    p.add_argument("--key", default="", help="only this key's requests (key_...)")
    p.add_argument(
        "--webhooks", action="store_true", help="webhook delivery attempts per endpoint and outcome"
    )
    p.set_defaults(handler=_usage)
